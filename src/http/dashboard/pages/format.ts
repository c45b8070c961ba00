import { html } from '../html.js';
import type { Html } from '../html.js';

/** `950ms`, `12s`, `3m 20s`, `2h 5m`: short ages and durations. */
export function formatAge(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1_000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** A server time as `HH:MM:SS.mmm` (UTC), the full ISO string on hover. */
export function time(iso: string | null): Html {
  if (iso === null) return html`<span class="muted">-</span>`;
  const short = iso.length >= 23 ? iso.slice(11, 23) : iso;
  return html`<time datetime="${iso}" title="${iso}">${short}</time>`;
}

export const percent = (fraction: number): string => `${Math.round(fraction * 100)}%`;

/** A state name as a colored badge (`st-<State>` in the stylesheet). */
export const badge = (state: string): Html =>
  html`<span class="badge st-${state.replace(/[^A-Za-z]/g, '')}">${state}</span>`;

/** Links to the pages of a run and of a task; ids are escaped like any other text. */
export const runLink = (runId: string): Html =>
  html`<a href="/runs/${encodeURIComponent(runId)}">${runId}</a>`;

export const taskLink = (runId: string, taskId: string, label?: string): Html =>
  html`<a href="/tasks/${encodeURIComponent(runId)}/${encodeURIComponent(taskId)}"
    >${label ?? `${runId}.${taskId}`}</a
  >`;
