/**
 * A due time in ISO 8601 basic form, UTC, whole seconds: `20260101T020000Z`. Short, sortable,
 * and within the id pattern, so it can stand in a run id and an event id.
 */
export function compactTime(ms: number): string {
  // `new Date(ms)` formats a given time; it reads no clock.
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
}

/**
 * The run a schedule's due time owns: `<schedule>-<compact due time>`. Every backend derives
 * the same id, so a leader that takes over after a failover completes the submit the last
 * one began instead of starting a second run.
 */
export const scheduledRunId = (name: string, dueAtMs: number): string =>
  `${name}-${compactTime(dueAtMs)}`;

/** The run an operator's `trigger` submits: apart from every due time's run id. */
export const manualRunId = (name: string, atMs: number): string =>
  `${name}-${compactTime(atMs)}-manual`;
