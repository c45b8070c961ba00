import type { EventRecord } from '../../../../actors/projection.js';

/** An event as the dashboard shows it: the stored record minus anything secret or bulky. */
export interface PublicEvent {
  seq: number;
  time: string;
  subject: string;
  type: string;
  data: Record<string, unknown>;
}

/**
 * Fields never sent to a browser. `tokenHash` would let an offline guess be checked against an
 * attempt token; a task's `input` may carry credentials the submitter passed to its command;
 * `outputInline` is up to 16 KiB of output, shown as its size (`outputBytes`) instead.
 */
const HIDDEN = new Set(['tokenHash', 'token', 'input', 'outputInline']);

/** The sanitized copy of a stored record (never the record itself: it is shared). */
export function publicEvent(r: EventRecord): PublicEvent {
  const data: Record<string, unknown> = {};
  const source = r.data !== null && typeof r.data === 'object' ? r.data : {};
  for (const [k, v] of Object.entries(source)) {
    if (!HIDDEN.has(k)) data[k] = v;
  }
  if (r.type === 'TaskCreated' && 'input' in source) {
    data['inputBytes'] = Buffer.byteLength(JSON.stringify(source.input) ?? '');
  }
  return {
    seq: r.seq,
    time: r.time,
    subject: r.subject,
    type: typeof r.type === 'string' ? r.type : '(undecodable)',
    data,
  };
}
