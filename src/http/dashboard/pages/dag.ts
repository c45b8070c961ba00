import { html } from '../html.js';
import type { Html } from '../html.js';
import type { StepView } from '../views/runs-view.js';

const NODE_W = 180;
const NODE_H = 58;
const GAP_X = 60;
const GAP_Y = 18;
const PAD = 10;

/**
 * A run's steps as a small DAG in SVG: one column per depth (the longest chain of `after`
 * edges above a step), steps in run order within a column, an edge from each `after` step to
 * its dependant. Runs have a handful of steps, so a layered layout is all it needs.
 */
export function dagSvg(steps: readonly StepView[]): Html {
  const columns = new Map<number, StepView[]>();
  for (const s of steps) columns.set(s.depth, [...(columns.get(s.depth) ?? []), s]);
  const pos = new Map<string, { x: number; y: number }>();
  let rows = 0;
  for (const [depth, list] of columns) {
    list.forEach((s, i) => {
      pos.set(s.stepId, { x: PAD + depth * (NODE_W + GAP_X), y: PAD + i * (NODE_H + GAP_Y) });
    });
    rows = Math.max(rows, list.length);
  }
  const width = PAD * 2 + Math.max(1, columns.size) * (NODE_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(1, rows) * (NODE_H + GAP_Y) - GAP_Y;
  const edges = steps.flatMap((s) =>
    s.after.flatMap((a) => {
      const from = pos.get(a);
      const to = pos.get(s.stepId);
      if (!from || !to) return [];
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x;
      const y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      return [
        html`<path class="edge" d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}"></path>`,
      ];
    }),
  );
  const nodes = steps.map((s) => {
    const p = pos.get(s.stepId)!;
    const done = Math.round((NODE_W - 20) * Math.min(1, s.progress));
    const label = s.stepId.length > 22 ? `${s.stepId.slice(0, 21)}…` : s.stepId;
    return html`<a href="#step-${s.stepId}" class="node st-${s.state}" data-step="${s.stepId}">
      <title>${s.stepId}: ${s.state}</title>
      <rect x="${p.x}" y="${p.y}" width="${NODE_W}" height="${NODE_H}" rx="6"></rect>
      <text x="${p.x + 10}" y="${p.y + 18}" class="node-title">${label}</text>
      <text x="${p.x + 10}" y="${p.y + 34}" class="node-state">
        ${s.state}${s.starved ? ' · starved' : ''} · ${s.counts.Succeeded}/${s.taskCount}
      </text>
      <rect
        x="${p.x + 10}"
        y="${p.y + 42}"
        width="${NODE_W - 20}"
        height="6"
        class="node-bar-bg"
      ></rect>
      <rect x="${p.x + 10}" y="${p.y + 42}" width="${done}" height="6" class="node-bar"></rect>
    </a>`;
  });
  return html`<svg
    class="dag"
    id="dag"
    viewBox="0 0 ${width} ${height}"
    width="${width}"
    height="${height}"
    role="img"
    aria-label="steps and their after edges"
  >
    <defs>
      <marker
        id="arrow"
        viewBox="0 0 10 10"
        refX="10"
        refY="5"
        markerWidth="6"
        markerHeight="6"
        orient="auto"
      >
        <path d="M0,0 L10,5 L0,10 z" class="arrow"></path>
      </marker>
    </defs>
    ${edges} ${nodes}
  </svg>`;
}
