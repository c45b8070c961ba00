import { html } from '../html.js';
import type { Html } from '../html.js';
import type { RunDetail } from '../views/runs-view.js';
import { formatAge } from './format.js';

const LABEL_W = 150;
const TRACK_W = 620;
const ROW_H = 24;
const END_EVENTS = new Set(['StepSucceeded', 'StepFailed', 'StepSkipped']);

/**
 * Per-step timeline on the run's time axis (from `RunSubmitted` to its end, or now): a bar
 * from when the step could run (created with no `after`, or `StepReady`) to when it ended,
 * with a marker for each of its events (Starved, Blocked, ...; hover for the time).
 */
export function timelineSvg(run: RunDetail, nowIso: string): Html {
  const t = (iso: string) => Date.parse(iso);
  const start = t(run.submittedAt);
  const times = run.steps.flatMap((s) => s.timeline.map((e) => t(e.time)));
  const end = Math.max(run.endedAt ? t(run.endedAt) : t(nowIso), ...times, start + 1);
  const span = end - start;
  const x = (ms: number) => LABEL_W + (TRACK_W * Math.min(span, Math.max(0, ms - start))) / span;
  const height = ROW_H * run.steps.length + 20;
  const rows = run.steps.map((s, i) => {
    const y = i * ROW_H;
    const created = s.timeline.find((e) => e.type === 'StepCreated');
    const ready = s.timeline.find((e) => e.type === 'StepReady');
    const from = ready ?? (s.after.length === 0 ? created : undefined);
    const ended = s.timeline.find((e) => END_EVENTS.has(e.type));
    const x1 = from ? x(t(from.time)) : null;
    const x2 = ended ? x(t(ended.time)) : run.endedAt ? x(t(run.endedAt)) : x(t(nowIso));
    return html`<g class="tl-row st-${s.state}" data-step="${s.stepId}">
      <text x="0" y="${y + 16}" class="tl-label">${s.stepId}</text>
      <line
        x1="${LABEL_W}"
        x2="${LABEL_W + TRACK_W}"
        y1="${y + 12}"
        y2="${y + 12}"
        class="tl-track"
      ></line>
      ${
        x1 === null
          ? ''
          : html`<rect
              x="${x1}"
              y="${y + 6}"
              width="${Math.max(2, x2 - x1)}"
              height="12"
              class="tl-bar"
            ></rect>`
      }
      ${s.timeline.map(
        (e) =>
          html`<circle cx="${x(t(e.time))}" cy="${y + 12}" r="4" class="tl-mark ev-${e.type}">
            <title>${e.type} at ${e.time}</title>
          </circle>`,
      )}
    </g>`;
  });
  return html`<svg
    class="timeline"
    id="timeline"
    viewBox="0 0 ${LABEL_W + TRACK_W + 10} ${height}"
    role="img"
    aria-label="per-step timeline"
  >
    ${rows}
    <text x="${LABEL_W}" y="${height - 4}" class="tl-axis">0</text>
    <text x="${LABEL_W + TRACK_W}" y="${height - 4}" class="tl-axis" text-anchor="end">
      ${formatAge(span)}
    </text>
  </svg>`;
}
