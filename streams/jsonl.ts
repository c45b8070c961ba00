import type { EventRecord } from '../actors/projection.js';

/**
 * One line of the event log (DESIGN.md section 8):
 * `{"seq","id","subject","time","type","data"}`. `export` writes `id`; replay does not need it.
 */
export function toJsonlLine(r: EventRecord): string {
  return JSON.stringify({
    seq: r.seq,
    ...(r.id ? { id: r.id } : {}),
    subject: r.subject,
    time: r.time,
    type: r.type,
    data: r.data,
  });
}

/** Splits a JSONL text into lines, keeping empty ones so line numbers stay true. */
export function splitLines(text: string): string[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

/** Whether a record belongs to run `runId` (its run, step or task subjects). */
export function isOfRun(subject: string, runId: string): boolean {
  const t = subject.split('.');
  return (
    t[1] === 'events' && (t[2] === 'run' || t[2] === 'step' || t[2] === 'task') && t[3] === runId
  );
}
