import { html } from '../html.js';
import type { Html } from '../html.js';
import type { RunDetail, StepView } from '../views/runs-view.js';
import { progressBar } from './bars.js';
import { dagSvg } from './dag.js';
import { badge, percent, taskLink, time } from './format.js';
import { actionButton } from './layout.js';
import { countsOf } from './runs-page.js';
import { timelineSvg } from './timeline.js';

function stepSection(run: RunDetail, s: StepView): Html {
  return html`<section class="step" id="step-${s.stepId}" data-step="${s.stepId}">
    <h3>
      ${s.stepId} ${badge(s.state)}
      ${s.starved ? html`<span class="badge starved">starved</span>` : ''}
    </h3>
    <p class="muted">
      tags ${s.tags.map((t) => html`<span class="tag">${t}</span> `)}
      ${s.after.length > 0 ? html`· after ${s.after.join(', ')}` : ''}
      ${s.maxConcurrent !== null ? html`· at most ${s.maxConcurrent} at once` : ''}
      ${s.priority !== 0 ? html`· priority ${s.priority}` : ''}
      ${s.reason ? html`· <span class="warn">${s.reason}</span>` : ''}
    </p>
    <div class="progress-cell">
      ${progressBar(s.progress)}
      <span class="pct">${s.counts.Succeeded}/${s.taskCount} (${percent(s.progress)})</span>
    </div>
    <p class="step-counts">${countsOf(s.counts, s.delayed)}</p>
    <details ${s.tasks.length <= 20 ? 'open' : ''}>
      <summary>${s.tasks.length + s.moreTasks} tasks</summary>
      <table class="tasks">
        <thead>
          <tr>
            <th>task</th>
            <th>state</th>
            <th>attempt</th>
            <th>worker</th>
          </tr>
        </thead>
        <tbody>
          ${s.tasks.map(
            (t) =>
              html`<tr data-task="${t.taskId}">
                <td class="mono">${taskLink(run.runId, t.taskId, t.taskId)}</td>
                <td>${badge(t.state)}</td>
                <td class="num">${t.attempt}</td>
                <td class="mono">${t.workerId ?? ''}</td>
              </tr>`,
          )}
        </tbody>
      </table>
      ${s.moreTasks > 0 ? html`<p class="muted">and ${s.moreTasks} more</p>` : ''}
    </details>
  </section>`;
}

/** The run page's `<main>`: header, DAG, timeline, then each step with its tasks. */
export function runMain(run: RunDetail, nowIso: string): Html {
  return html`<div class="run" data-run="${run.runId}">
    <h1>
      Run <span class="mono">${run.runId}</span> <span id="run-state">${badge(run.state)}</span>
      ${
        run.state === 'Running'
          ? actionButton('Cancel run', `/api/runs/${encodeURIComponent(run.runId)}/cancel`, {
              confirm: `Cancel run ${run.runId}? Its open tasks are cancelled and its unfinished steps skipped.`,
              danger: true,
              id: 'cancel-run',
            })
          : ''
      }
    </h1>
    <p class="muted">
      submitted ${time(run.submittedAt)}${run.endedAt ? html` · ended ${time(run.endedAt)}` : ''}
      ${run.reason ? html` · <span class="warn">${run.reason}</span>` : ''}
      ${
        run.expiredAt
          ? html` · expired ${time(run.expiredAt)} (SONAR_RETENTION): only this summary is kept`
          : ''
      }
    </p>
    <div class="progress-cell big-progress">
      ${progressBar(run.progress)}
      <span class="pct" id="run-progress"
        >${run.counts.Succeeded}/${run.taskCount} (${percent(run.progress)})</span
      >
    </div>
    <p>${countsOf(run.counts, run.delayed)}</p>
    <h2>Steps</h2>
    <div class="scroll">${dagSvg(run.steps)}</div>
    <h2>Timeline</h2>
    <div class="scroll">${timelineSvg(run, nowIso)}</div>
    ${run.steps.map((s) => stepSection(run, s))}
  </div>`;
}
