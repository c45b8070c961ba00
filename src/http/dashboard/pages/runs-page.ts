import { html } from '../html.js';
import type { Html } from '../html.js';
import type { RunSummary, StateCounts } from '../views/runs-view.js';
import { TASK_STATES } from '../views/runs-view.js';
import { progressBar } from './bars.js';
import { badge, percent, runLink, time } from './format.js';

/**
 * Non-zero task counts as small badges: `3 Running 5 Succeeded`, then the delayed ones among
 * the Pending as their own badge (`2 delayed`).
 */
export function countsOf(counts: StateCounts, delayed = 0): Html {
  const shown = TASK_STATES.filter((s) => counts[s] > 0);
  if (shown.length === 0) return html`<span class="muted">no tasks yet</span>`;
  return html`${shown.map(
    (s) => html`<span class="count-chip st-${s}" data-state="${s}">${counts[s]} ${s}</span> `,
  )}${delayed > 0 ? html`<span class="count-chip delayed" data-state="delayed">${delayed} delayed</span>` : ''}`;
}

/** The Runs page's `<main>`: newest first, state and progress. */
export function runsMain(runs: RunSummary[]): Html {
  if (runs.length === 0) return html`<p class="muted">No runs yet.</p>`;
  return html`<table id="runs">
    <thead>
      <tr>
        <th>run</th>
        <th>state</th>
        <th>progress</th>
        <th>tasks</th>
        <th>submitted</th>
        <th>ended</th>
      </tr>
    </thead>
    <tbody>
      ${runs.map(
        (r) =>
          html`<tr data-run="${r.runId}">
            <td class="mono">${runLink(r.runId)}</td>
            <td>${badge(r.state)}</td>
            <td class="progress-cell">
              ${progressBar(r.progress)}
              <span class="pct">${r.counts.Succeeded}/${r.taskCount} (${percent(r.progress)})</span>
            </td>
            <td>${countsOf(r.counts, r.delayed)}</td>
            <td>${time(r.submittedAt)}</td>
            <td>${time(r.endedAt)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}
