import { html } from '../html.js';
import type { Html } from '../html.js';
import type { OverviewView, WorkerRow } from '../views/overview-view.js';
import { capacityBar } from './bars.js';
import { formatAge, runLink, time } from './format.js';

function workerRow(w: WorkerRow): Html {
  const state =
    w.state === 'Draining'
      ? html`<span class="badge st-Draining">Draining</span>`
      : html`<span class="badge st-${w.state}">${w.state}</span>`;
  return html`<tr data-worker="${w.workerId}" class="${w.eligible ? '' : 'ineligible'}">
    <td class="mono">${w.workerId}</td>
    <td>${w.host}${w.instanceId ? html`<br /><span class="muted">${w.instanceId}</span>` : ''}</td>
    <td>${w.tags.map((t) => html`<span class="tag">${t}</span> `)}</td>
    <td class="num">${w.inUse} / ${w.slots}</td>
    <td>${state}${w.eligible ? '' : html` <span class="muted">(not placing)</span>`}</td>
    <td>
      ${
        w.pulseAt === null
          ? html`<span class="muted">no pulse yet</span>`
          : html`<span class="age" data-pulse-at="${w.pulseAt}"
              >${formatAge(w.pulseAgeMs ?? 0)}</span
            >`
      }
    </td>
    <td>
      ${
        w.spotDeadline
          ? html`<span class="warn">spot notice: gone by ${time(w.spotDeadline)}</span>`
          : w.drainReason
            ? html`<span class="muted">${w.drainReason}</span>`
            : ''
      }
    </td>
  </tr>`;
}

/** The Overview page's `<main>`: fleet, capacity, queues, leader, starved steps. */
export function overviewMain(v: OverviewView): Html {
  return html`<div data-now="${v.now}">
    <section class="cards">
      <div class="card">
        <h3>Workers</h3>
        <p class="big" id="worker-count">${v.workers.length}</p>
      </div>
      <div class="card">
        <h3>Active runs</h3>
        <p class="big">${v.activeRuns}</p>
      </div>
      <div class="card">
        <h3>Tasks</h3>
        <p>
          ${v.tasks.pending} pending${v.tasks.delayed > 0 ? ` (${v.tasks.delayed} delayed)` : ''} ·
          ${v.tasks.published} published · ${v.tasks.running} running · ${v.tasks.finalizing}
          finalizing
        </p>
      </div>
      <div class="card">
        <h3>Finalize queue</h3>
        <p class="big" id="finalize-queue">${v.finalizeQueue ?? '?'}</p>
      </div>
      <div class="card ${v.poisoned > 0 ? 'alert' : ''}">
        <h3>Poisoned</h3>
        <p class="big"><a href="/poisoned" id="poisoned-count">${v.poisoned}</a></p>
      </div>
      <div class="card">
        <h3>Reconciler leader</h3>
        <p id="leader">
          ${v.lockHolder ?? v.leader?.nodeId ?? html`<span class="warn">none</span>`}
          ${
            v.leader
              ? html`<br /><span class="muted">elected ${time(v.leader.electedAt)}</span>`
              : ''
          }
        </p>
      </div>
    </section>

    ${
      v.starved.length > 0
        ? html`<section class="starved" id="starved">
            <h2>Starved steps</h2>
            <p class="muted">Ready with pending tasks, and no eligible worker has their tags.</p>
            <ul>
              ${v.starved.map(
                (s) =>
                  html`<li>
                    ${runLink(s.runId)} / <b>${s.stepId}</b> needs
                    ${s.tags.map((t) => html`<span class="tag">${t}</span> `)}
                  </li>`,
              )}
            </ul>
          </section>`
        : ''
    }

    <section>
      <h2>Capacity</h2>
      <div class="bars" id="capacity">
        ${capacityBar(v.capacity.global, 'global')}
        ${v.capacity.tags.map((t) => capacityBar(t, t.tag))}
      </div>
      ${
        v.rateLimited
          ? html`<p id="rate-limits">
              Rate limits:
              ${v.rateLimited.map(
                (r) => html`<span class="tag">${r.tag}</span> ${r.rate} (${r.left} left) `,
              )}
            </p>`
          : ''
      }
    </section>

    <section>
      <h2>Live workers</h2>
      ${
        v.workers.length === 0
          ? html`<p class="muted" id="no-workers">No live workers.</p>`
          : html`<table id="workers">
              <thead>
                <tr>
                  <th>worker</th>
                  <th>host</th>
                  <th>tags</th>
                  <th>slots in use</th>
                  <th>state</th>
                  <th>pulse age</th>
                  <th>notice</th>
                </tr>
              </thead>
              <tbody>
                ${v.workers.map(workerRow)}
              </tbody>
            </table>`
      }
    </section>
  </div>`;
}
