import { isWrongLastSequence } from '../../../streams/errors.js';
import type { KV } from '@nats-io/kv';

/** The key of the full sweep's turn in `sonar_schedule` (DESIGN.md section 2). */
export const FULL_SWEEP_KEY = 'full-sweep';

/** The value under `full-sweep`: when the last sweep was claimed, and by which backend. */
export interface SweepTurn {
  lastAt: string;
  by: string;
}

/** Whether this backend won the turn; when not, the turn that holds it (if readable). */
export type SweepClaim = { won: true; revision: number } | { won: false; held: SweepTurn | null };

function turnOf(raw: string): SweepTurn | null {
  try {
    const v = JSON.parse(raw) as Partial<SweepTurn>;
    return typeof v.lastAt === 'string' && typeof v.by === 'string'
      ? { lastAt: v.lastAt, by: v.by }
      : null;
  } catch (_err: unknown) {
    return null;
  }
}

/**
 * Claims the full sweep's turn by compare-and-set (DESIGN.md section 2): `create` when no
 * turn was ever taken, `update` with the read revision when the last turn's `lastAt` is more
 * than `intervalMs` old. Of backends racing for one turn exactly one write lands; the others
 * get "wrong last sequence" and lose. No TTL lock: the bucket has no TTL (a lock bucket's TTL
 * is seconds, and 2.9 has no per-key TTL), the turn itself is the record. An unreadable
 * value counts as an old turn, so a bad write never stops the sweep for good.
 */
export async function claimSweepTurn(
  kv: KV,
  opts: { nodeId: string; now: number; intervalMs: number; key?: string },
): Promise<SweepClaim> {
  const key = opts.key ?? FULL_SWEEP_KEY;
  const mine = JSON.stringify({ lastAt: new Date(opts.now).toISOString(), by: opts.nodeId });
  const entry = await kv.get(key);
  const held = entry?.operation === 'PUT' ? turnOf(entry.string()) : null;
  // Not yet due while the last turn is at most one interval old (NaN, a bad time: due).
  if (held && opts.now - Date.parse(held.lastAt) <= opts.intervalMs) return { won: false, held };
  try {
    const revision =
      entry === null ? await kv.create(key, mine) : await kv.update(key, mine, entry.revision);
    return { won: true, revision };
  } catch (err: unknown) {
    if (isWrongLastSequence(err)) return { won: false, held: null };
    throw err;
  }
}
