import type { PoisonedAdmin, PoisonedTask } from '../../../backend/finalize/index.js';
import type { FinalizeFailure } from '../../../backend/finalize/index.js';

/** A poisoned task with its error history (the poison record's job, with its output, left out). */
export interface PoisonedRow extends PoisonedTask {
  errors: FinalizeFailure[];
  poisonedAt: string | null;
  deliveries: number | null;
}

/**
 * The first `limit` poisoned tasks (task key order) with their histories; `sonar poisoned
 * show` for each. The record's `job` may hold the output inline, so only its facts are kept.
 */
export async function buildPoisoned(
  admin: PoisonedAdmin,
  limit: number,
  runId?: string,
): Promise<{ total: number; tasks: PoisonedRow[] }> {
  const all = admin.list(runId);
  const tasks = await Promise.all(
    all.slice(0, limit).map(async (t): Promise<PoisonedRow> => {
      try {
        const d = await admin.show(t.task);
        return {
          ...t,
          errors: d.errors,
          poisonedAt: d.poison?.poisonedAt ?? null,
          deliveries: d.poison?.deliveries ?? null,
        };
      } catch (_err: unknown) {
        // Retried or cancelled between list and show: listed without its history.
        return { ...t, errors: [], poisonedAt: null, deliveries: null };
      }
    }),
  );
  return { total: all.length, tasks };
}
