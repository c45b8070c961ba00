import { html } from '../html.js';
import type { Html } from '../html.js';
import type { PoisonedRow } from '../views/poisoned-view.js';
import { taskLink, time } from './format.js';
import { actionButton } from './layout.js';

function poisonedSection(p: PoisonedRow): Html {
  const task = encodeURIComponent(p.task);
  return html`<section class="poisoned" data-task="${p.task}">
    <h3>
      ${taskLink(p.runId, p.taskId)} <span class="muted">step ${p.stepId}</span>
      ${actionButton('Retry', `/api/poisoned/${task}/retry`, {
        confirm: `Finalize ${p.task} again? Fix the cause first (results sink, output store).`,
      })}
      ${actionButton('Cancel', `/api/poisoned/${task}/cancel`, {
        confirm: `Cancel poisoned task ${p.task}? Its step then fails.`,
        danger: true,
      })}
    </h3>
    <p>
      attempt <span class="mono">${p.attemptId}</span> · operator retries ${p.round} · output
      ${p.outputRef ?? '-'}${p.outputBytes === null ? '' : ` (${p.outputBytes} bytes)`}
      ${p.poisonedAt ? html`· poisoned ${time(p.poisonedAt)} after ${p.deliveries} deliveries` : ''}
    </p>
    <pre class="error">${p.error ?? ''}</pre>
    ${
      p.errors.length > 0
        ? html`<table class="errors">
            <thead>
              <tr>
                <th>time</th>
                <th>round</th>
                <th>delivery</th>
                <th>by</th>
                <th>error</th>
              </tr>
            </thead>
            <tbody>
              ${p.errors.map(
                (e) =>
                  html`<tr>
                    <td>${time(e.at)}</td>
                    <td class="num">${e.round}</td>
                    <td class="num">${e.delivery}${e.permanent ? ' (permanent)' : ''}</td>
                    <td class="mono">${e.by}</td>
                    <td class="detail">${e.error}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : ''
    }
  </section>`;
}

/** The Poisoned page's `<main>`: each poisoned task with its error history and actions. */
export function poisonedMain(rows: PoisonedRow[], total: number): Html {
  if (rows.length === 0) return html`<p class="muted" id="no-poisoned">No poisoned tasks.</p>`;
  return html`<p id="poisoned-total">
      ${total} poisoned${total > rows.length ? html` (showing the first ${rows.length})` : ''}
    </p>
    ${rows.map(poisonedSection)}`;
}
