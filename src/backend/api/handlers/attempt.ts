import { ErrorCode, SonarError } from '../../../../actors/errors.js';
import { keyOf } from '../../../../actors/ids.js';
import type { EventRecord, TaskSnapshot } from '../../../../actors/projection.js';
import { tokenMatches } from '../../reconciler/index.js';
import type { BackendContext } from '../../context.js';
import { syncRecent } from './sync.js';

/** The fields every attempt-scoped request carries (start, result, fail, release). */
export interface AttemptRequest {
  runId: string;
  taskId: string;
  attemptId: string;
  token: string;
  workerId: string;
}

/** A request's task and whether it names the task's current attempt; the token is checked. */
export interface ResolvedAttempt {
  subject: string;
  task: TaskSnapshot;
  current: boolean;
  /** The task's events, read once when needed (an earlier attempt, or a retried request). */
  history(): Promise<EventRecord[]>;
}

const dataOf = (r: EventRecord): Record<string, unknown> =>
  typeof r.data === 'object' && r.data !== null ? (r.data as Record<string, unknown>) : {};

export function staleError(req: AttemptRequest, why: string): SonarError {
  return new SonarError(
    ErrorCode.StaleAttempt,
    `task ${req.runId}.${req.taskId}: attempt ${req.attemptId} ${why}`,
    { runId: req.runId, taskId: req.taskId, attemptId: req.attemptId },
  );
}

function invalidToken(req: AttemptRequest): SonarError {
  return new SonarError(
    ErrorCode.InvalidToken,
    `task ${req.runId}.${req.taskId}: the token does not match attempt ${req.attemptId}`,
    { runId: req.runId, taskId: req.taskId, attemptId: req.attemptId },
  );
}

/**
 * Finds the request's task and checks its credentials, appending nothing (after catching up
 * with the stream, unless `synced`: the caller caught up since the request arrived):
 * no task -> `not_found`; an attempt the task never had -> `stale_attempt`; a token whose
 * sha256 is not that attempt's `tokenHash` -> `invalid_token`. An earlier attempt with its
 * right token comes back with `current: false`: the caller answers a retried request the
 * same as before, and refuses anything else as stale.
 */
export async function resolveAttempt(
  ctx: BackendContext,
  req: AttemptRequest,
  opts: { synced?: boolean } = {},
): Promise<ResolvedAttempt> {
  const subject = ctx.names.subjects.task(req.runId, req.taskId);
  if (!opts.synced) await syncRecent(ctx);
  const entry = ctx.loop.projection.tasks.get(keyOf(req.runId, req.taskId));
  if (!entry) {
    throw new SonarError(ErrorCode.NotFound, `no task ${req.runId}.${req.taskId}`, {
      runId: req.runId,
      taskId: req.taskId,
    });
  }
  let events: Promise<EventRecord[]> | null = null;
  const history = (): Promise<EventRecord[]> => (events ??= ctx.store.readAggregate(subject));
  const task = entry.snapshot;
  if (task.context.attemptId === req.attemptId && task.context.tokenHash !== null) {
    if (!tokenMatches(req.token, task.context.tokenHash)) throw invalidToken(req);
    return { subject, task, current: true, history };
  }
  // Not the current attempt: its TaskPublished tells a stale token from a forged one.
  const published = (await history()).find(
    (r) => r.type === 'TaskPublished' && dataOf(r)['attemptId'] === req.attemptId,
  );
  const tokenHash = published && dataOf(published)['tokenHash'];
  if (typeof tokenHash !== 'string') throw staleError(req, 'is not an attempt of this task');
  if (!tokenMatches(req.token, tokenHash)) throw invalidToken(req);
  return { subject, task, current: false, history };
}

/**
 * True when the task's log holds a `type` event of the request's attempt that `matches`:
 * the request was carried out before (its reply was lost), so it gets the same answer and
 * appends nothing.
 */
export async function didHappen(
  a: ResolvedAttempt,
  req: AttemptRequest,
  type: string,
  matches: (data: Record<string, unknown>) => boolean = () => true,
): Promise<boolean> {
  return (await a.history()).some(
    (r) => r.type === type && dataOf(r)['attemptId'] === req.attemptId && matches(dataOf(r)),
  );
}
