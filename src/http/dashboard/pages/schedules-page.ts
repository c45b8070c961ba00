import { formatDuration } from '../../../duration.js';
import type { FireInfo, ScheduleInfo } from '../../../schedules/schedule-info.js';
import { html } from '../html.js';
import type { Html } from '../html.js';
import { badge, runLink, time } from './format.js';

const when = (s: ScheduleInfo): string =>
  s.cron !== null
    ? `cron ${s.cron} (${s.timezone ?? 'UTC'})`
    : `every ${formatDuration(s.everyMs ?? 0)}`;

/** A fire: its run and the run's state, or why it submitted none. */
function fireCell(f: FireInfo | null): Html {
  if (f === null) return html`<span class="muted">-</span>`;
  const run = f.skipped === null ? runLink(f.runId) : html`<span class="muted">${f.runId}</span>`;
  const state = f.runState === null ? html`skipped (${f.skipped})` : badge(f.runState);
  const missed = f.missed > 0 ? html` <span class="muted">${f.missed} missed before</span>` : '';
  return html`<span class="mono">${run}</span> ${state} ${time(f.dueAt)}
    <span class="muted">${f.trigger}</span>${missed}`;
}

/** The Schedules page's `<main>`: each schedule with its next due time and its last runs. */
export function schedulesMain(schedules: ScheduleInfo[]): Html {
  if (schedules.length === 0) {
    return html`<p class="muted" id="no-schedules">
      No schedules. Create one with <code>sonar schedule create</code>.
    </p>`;
  }
  return html`<table id="schedules">
    <thead>
      <tr>
        <th>schedule</th>
        <th>state</th>
        <th>when</th>
        <th>next</th>
        <th>last run</th>
        <th>recent fires</th>
        <th>policies</th>
      </tr>
    </thead>
    <tbody>
      ${schedules.map(
        (s) =>
          html`<tr data-schedule="${s.name}">
            <td class="mono">${s.name}</td>
            <td>${badge(s.state)}</td>
            <td class="mono">${when(s)}</td>
            <td>${time(s.next)}</td>
            <td>${fireCell(s.lastRun)}</td>
            <td>
              ${s.recent.slice(0, 5).map((f) => html`<div>${fireCell(f)}</div>`)}
              <span class="muted">${s.fires} fires, ${s.runs} runs</span>
            </td>
            <td class="muted">
              overlap ${s.overlap} · catch-up ${s.catchUp} (up to ${s.catchUpLimit}) · missed after
              ${formatDuration(s.missedAfterMs)}
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}
