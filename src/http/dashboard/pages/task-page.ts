import { isOpenTaskState } from '../../../../actors/projection.js';
import { html } from '../html.js';
import type { Html } from '../html.js';
import type { PublicEvent } from '../views/public-event.js';
import type { TaskView } from '../views/task-view.js';
import type { TaskReports } from '../dashboard-data.js';
import { badge, runLink, time } from './format.js';
import { actionButton } from './layout.js';

/** An event's data as `key=value` pairs (values JSON-encoded unless strings). */
export function fieldsOf(e: PublicEvent): Html {
  return html`${Object.entries(e.data).map(
    ([k, v]) =>
      html`<span class="field"
        ><span class="k">${k}</span>=<span class="v"
          >${typeof v === 'string' ? v : JSON.stringify(v)}</span
        ></span
      > `,
  )}`;
}

const row = (label: string, value: Html | string | number | null): Html =>
  html`<tr>
    <th>${label}</th>
    <td>${value ?? html`<span class="muted">-</span>`}</td>
  </tr>`;

/**
 * The Task page's `<main>`: state, progress, attempts, recoveries, output, errors, the
 * current attempt's log, full history.
 */
export function taskMain(t: TaskView, reports: TaskReports = { progress: null, log: null }): Html {
  const { progress, log } = reports;
  const path = `${encodeURIComponent(t.runId)}/${encodeURIComponent(t.taskId)}`;
  return html`<div class="task" data-task="${t.task}">
    <h1>
      Task <span class="mono">${t.task}</span> <span id="task-state">${badge(t.state)}</span>
      ${
        t.state === 'Poisoned'
          ? actionButton(
              'Retry finalization',
              `/api/poisoned/${encodeURIComponent(t.task)}/retry`,
              {
                confirm: `Finalize ${t.task} again?`,
                id: 'retry-task',
              },
            )
          : ''
      }
      ${
        isOpenTaskState(t.state)
          ? actionButton('Cancel task', `/api/tasks/${path}/cancel`, {
              confirm: `Cancel task ${t.task}?`,
              danger: true,
              id: 'cancel-task',
            })
          : ''
      }
    </h1>
    <table class="kv">
      ${row('run / step', html`${runLink(t.runId)} / ${t.stepId}`)}
      ${row('tags', html`${t.tags.map((x) => html`<span class="tag">${x}</span> `)}`)}
      ${row('command', t.command ? html`<code>${JSON.stringify(t.command)}</code>` : null)}
      ${row(
        'progress',
        progress
          ? html`<span id="task-progress" class="mono">${JSON.stringify(progress.value)}</span>
              ${time(progress.at)}`
          : null,
      )}
      ${row('attempt', `${t.attempt} (failures ${t.failures} of ${t.maxAttempts})`)}
      ${row('attemptId', t.attemptId)} ${row('tag', t.tag)} ${row('worker', t.workerId)}
      ${row('recoveries', t.recoveries)} ${row('retry at', t.retryAt ? time(t.retryAt) : null)}
      ${row('output', t.output ? `${t.output.ref} (${t.output.bytes} bytes)` : null)}
      ${row('result key', t.resultKey)} ${row('finalize retries', t.finalizeRound)}
      ${row('error', t.error ? html`<pre class="error">${t.error}</pre>` : null)}
    </table>

    <h2>Attempts</h2>
    ${
      t.attempts.length === 0
        ? html`<p class="muted">Not published yet.</p>`
        : html`<table id="attempts">
            <thead>
              <tr>
                <th>#</th>
                <th>attemptId</th>
                <th>tag</th>
                <th>published</th>
                <th>worker</th>
                <th>started</th>
                <th>outcome</th>
                <th>detail</th>
              </tr>
            </thead>
            <tbody>
              ${t.attempts.map(
                (a) =>
                  html`<tr>
                    <td class="num">${a.attempt}</td>
                    <td class="mono">${a.attemptId}</td>
                    <td>${a.tag ?? ''}</td>
                    <td>${time(a.publishedAt)}</td>
                    <td class="mono">${a.workerId ?? ''}</td>
                    <td>${time(a.startedAt)}</td>
                    <td>
                      ${a.outcome ?? html`<span class="muted">open</span>`} ${time(a.outcomeAt)}
                    </td>
                    <td class="detail">${a.detail ?? ''}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    ${
      t.recoveryLog.length > 0
        ? html`<h2>Recoveries</h2>
            <ul id="recoveries">
              ${t.recoveryLog.map(
                (r) =>
                  html`<li>
                    ${time(r.time)} ${r.type} <b>${r.reason}</b> (counted ${r.recoveries})
                  </li>`,
              )}
            </ul>`
        : ''
    }
    ${
      log
        ? html`<h2>Log of attempt ${log.attempt}</h2>
            ${log.cut ? html`<p class="muted">Earlier output is cut: sonar logs prints all that was kept.</p>` : ''}
            <pre id="task-log" class="log">${log.text}</pre>`
        : ''
    }

    <h2>History</h2>
    <table id="history" class="events">
      <thead>
        <tr>
          <th>seq</th>
          <th>time</th>
          <th>type</th>
          <th>data</th>
        </tr>
      </thead>
      <tbody>
        ${t.history.map(
          (e) =>
            html`<tr data-type="${e.type}">
              <td class="num">${e.seq}</td>
              <td>${time(e.time)}</td>
              <td>${badge(e.type)}</td>
              <td>${fieldsOf(e)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}
