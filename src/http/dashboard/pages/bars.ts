import { html } from '../html.js';
import type { Html } from '../html.js';
import type { CapacityBar } from '../views/overview-view.js';

/**
 * A stacked bar (running, published, free) as SVG. Widths are SVG attributes, not inline
 * styles, so the Content Security Policy can forbid inline styles too.
 */
export function capacityBar(b: CapacityBar, label: string): Html {
  const scale = Math.max(b.total, b.running + b.published, 1);
  const w = (n: number) => ((100 * n) / scale).toFixed(2);
  const running = (100 * b.running) / scale;
  const published = (100 * b.published) / scale;
  return html`<div class="bar-row" data-tag="${label}">
    <span class="bar-label">${label}</span>
    <svg class="bar" viewBox="0 0 100 10" preserveAspectRatio="none" role="img">
      <title>
        ${label}: ${b.running} running, ${b.published} published, ${b.free} free of ${b.total}
      </title>
      <rect class="bar-bg" x="0" y="0" width="100" height="10"></rect>
      <rect class="bar-running" x="0" y="0" width="${w(b.running)}" height="10"></rect>
      <rect
        class="bar-published"
        x="${running.toFixed(2)}"
        y="0"
        width="${w(b.published)}"
        height="10"
      ></rect>
      <rect
        class="bar-free"
        x="${(running + published).toFixed(2)}"
        y="0"
        width="${w(b.free)}"
        height="10"
      ></rect>
    </svg>
    <span class="bar-figures"
      ><b class="running">${b.running}</b> running ·
      <b class="published">${b.published}</b> published · <b class="free">${b.free}</b> free /
      ${b.total}</span
    >
  </div>`;
}

/** A one-color progress bar (0 to 1). */
export function progressBar(fraction: number, cls = ''): Html {
  const width = (100 * Math.min(1, Math.max(0, fraction))).toFixed(1);
  return html`<svg class="progress ${cls}" viewBox="0 0 100 6" preserveAspectRatio="none">
    <rect class="progress-bg" x="0" y="0" width="100" height="6"></rect>
    <rect class="progress-fg" x="0" y="0" width="${width}" height="6"></rect>
  </svg>`;
}
