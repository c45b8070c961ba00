import { ValidationError } from '../../../actors/errors.js';
import { isId } from '../../../actors/ids.js';
import { validationErrorOf } from '../../backend/api/index.js';
import type { ApiCall, Handlers } from '../../backend/api/index.js';
import type { BackendContext } from '../../backend/context.js';
import { apiHandlers } from '../../backend/api/index.js';
import { requestSchemas } from '../../protocol.js';

const DEFAULT_REASON = 'cancelled from the dashboard';

/** `{"reason": "..."}` from an action's JSON body (which may be empty). */
function reasonOf(body: string, fallback: string): string {
  if (body.trim() === '') return fallback;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (_err: unknown) {
    throw new ValidationError('request body is not JSON');
  }
  const reason = (parsed as { reason?: unknown } | null)?.reason;
  if (reason === undefined || reason === null || reason === '') return fallback;
  if (typeof reason !== 'string') throw new ValidationError("'reason' must be a string");
  return reason;
}

/** A dashboard action answers its browser once; it has no progress to tell. */
const ONE_ANSWER: ApiCall = { progress: () => {} };

/**
 * The dashboard's actions do exactly what the CLI does, through the same code: the backend's
 * own handlers of `cancel`, `poisoned.retry` and `poisoned.cancel` (what `sonar cancel` and
 * `sonar poisoned retry|cancel` ask for over NATS).
 */
export class DashboardActions {
  private readonly handlers: Handlers;

  constructor(
    ctx: BackendContext,
    private readonly by: string,
  ) {
    this.handlers = apiHandlers(ctx);
  }

  /** `sonar cancel RUN [--task ID]`. */
  async cancel(runId: string, taskId: string | undefined, body: string) {
    const parsed = requestSchemas.cancel.safeParse({
      runId,
      ...(taskId !== undefined && { taskId }),
      reason: reasonOf(body, DEFAULT_REASON),
    });
    if (!parsed.success) throw validationErrorOf('cancel', parsed.error);
    return this.handlers.cancel!(parsed.data, ONE_ANSWER);
  }

  /** `sonar poisoned retry RUN.TASK`. */
  retry(task: string) {
    const [runId, taskId] = taskRef(task).split('.') as [string, string];
    return this.handlers['poisoned.retry']!({ runId, taskId, by: this.by }, ONE_ANSWER);
  }

  /** `sonar poisoned cancel RUN.TASK`. */
  cancelPoisoned(task: string, body: string) {
    const [runId, taskId] = taskRef(task).split('.') as [string, string];
    const reason = reasonOf(body, 'poisoned task cancelled from the dashboard');
    return this.handlers['poisoned.cancel']!({ runId, taskId, reason }, ONE_ANSWER);
  }
}

/** `RUN.TASK`, both valid ids, as `sonar poisoned` takes it. */
export function taskRef(ref: string): string {
  const parts = ref.split('.');
  if (parts.length !== 2 || !parts.every(isId)) {
    throw new ValidationError(`task must be RUN.TASK, got ${JSON.stringify(ref)}`);
  }
  return ref;
}
