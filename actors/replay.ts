import { applyEvent, createProjection } from './projection.js';
import type { EventRecord, Projection } from './projection.js';

/** A line replay could not use: undecodable, or an event its machine did not accept. */
export interface Skipped {
  seq: number;
  reason: string;
}

export interface ReplayResult {
  projection: Projection;
  skipped: Skipped[];
}

/**
 * Parses one JSONL line of the DESIGN.md section 8 format. `lineNo` (1-based) stands in for
 * `seq` when the line has none readable.
 */
export function parseEventLine(line: string, lineNo: number): EventRecord | Skipped {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return { seq: lineNo, reason: `line ${lineNo} is not JSON` };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { seq: lineNo, reason: `line ${lineNo} is not a JSON object` };
  }
  const o = raw as Record<string, unknown>;
  const seq = Number.isSafeInteger(o.seq) && (o.seq as number) > 0 ? (o.seq as number) : lineNo;
  if (typeof o.subject !== 'string') return { seq, reason: "'subject' must be a string" };
  if (typeof o.time !== 'string' || Number.isNaN(Date.parse(o.time))) {
    return { seq, reason: "'time' must be an ISO-8601 time" };
  }
  return {
    seq,
    subject: o.subject,
    time: o.time,
    type: o.type,
    data: o.data,
    ...(typeof o.v === 'number' ? { v: o.v } : {}),
  };
}

const isSkipped = (r: EventRecord | Skipped): r is Skipped => 'reason' in r;

/**
 * Folds event lines, in file order, into a projection (DESIGN.md section 8). A line that
 * cannot be decoded, and an event the machine does not accept, is listed in `skipped` and
 * replay goes on; it never throws on bad input.
 */
export function replay(
  lines: Iterable<string>,
  into: Projection = createProjection(),
): ReplayResult {
  const skipped: Skipped[] = [];
  let lineNo = 0;
  for (const line of lines) {
    lineNo++;
    if (line.trim() === '') continue;
    const record = parseEventLine(line, lineNo);
    if (isSkipped(record)) {
      skipped.push(record);
      continue;
    }
    const outcome = applyEvent(into, record);
    if (!outcome.ok) skipped.push({ seq: record.seq, reason: outcome.reason });
  }
  return { projection: into, skipped };
}

/** Folds already-parsed records (the stream path): the same fold as `replay`. */
export function replayRecords(
  records: Iterable<EventRecord>,
  into: Projection = createProjection(),
): ReplayResult {
  const skipped: Skipped[] = [];
  for (const record of records) {
    const outcome = applyEvent(into, record);
    if (!outcome.ok) skipped.push({ seq: record.seq, reason: outcome.reason });
  }
  return { projection: into, skipped };
}
