import { IllegalTransitionError } from '../../../../actors/errors.js';
import type { Command, EventWriter } from '../../projection/index.js';

/**
 * What became of one command: appended now (`written`), found stored already by its event id
 * (`duplicate`), or refused by the machine because the aggregate moved on (`skipped`).
 */
export type WriteOutcome = 'written' | 'duplicate' | 'skipped';

/**
 * Writes many events to distinct aggregates, pipelined (`writeMany`), then writes one by one,
 * re-judged, whatever did not land: an aggregate another writer moved meanwhile
 * (ConcurrencyError), or a batch refused as a whole because one event no longer fits.
 * An event the machine now refuses is `skipped`; other errors throw.
 *
 * @returns one outcome per command, in order.
 */
export async function writeAll(writer: EventWriter, cmds: Command[]): Promise<WriteOutcome[]> {
  const outcomes = new Array<WriteOutcome | undefined>(cmds.length);
  if (cmds.length === 0) return [];
  try {
    const results = await writer.writeMany(cmds);
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') outcomes[i] = r.value.duplicate ? 'duplicate' : 'written';
    });
  } catch (err: unknown) {
    // writeMany judges every event before appending any: one refusal refuses the batch.
    if (!(err instanceof IllegalTransitionError)) throw err;
  }
  for (let i = 0; i < cmds.length; i++) {
    if (outcomes[i] !== undefined) continue;
    try {
      outcomes[i] = (await writer.write(cmds[i]!)).duplicate ? 'duplicate' : 'written';
    } catch (err: unknown) {
      if (!(err instanceof IllegalTransitionError)) throw err;
      outcomes[i] = 'skipped';
    }
  }
  return outcomes as WriteOutcome[];
}

/** How many outcomes are appends (new or found stored). */
export const countWritten = (outcomes: WriteOutcome[]): number =>
  outcomes.filter((o) => o !== 'skipped').length;
