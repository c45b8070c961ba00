import { keyOf } from '../../../../actors/ids.js';
import type { Handlers } from '../api-service.js';
import type { BackendContext } from '../../context.js';
import { FailureLog, PoisonedAdmin } from '../../finalize/index.js';
import { syncAll } from './sync.js';

/**
 * `poisoned.list`, `poisoned.show`, `poisoned.retry` and `poisoned.cancel`: the operator's
 * side of poison (`sonar poisoned`), served by a backend so that an operator's credential
 * never writes to the event stream itself. Each is judged on the projection caught up with
 * the whole stream, as `cancel` is.
 */
export function poisonedHandlers(ctx: BackendContext): Handlers {
  let admin: Promise<PoisonedAdmin> | null = null;
  const ready = async (): Promise<PoisonedAdmin> => {
    admin ??= FailureLog.open(ctx.nc, ctx.names).then(
      (failures) =>
        new PoisonedAdmin({
          names: ctx.names,
          js: ctx.js,
          jsm: ctx.jsm,
          loop: ctx.loop,
          writer: ctx.writer,
          failures,
        }),
    );
    // A failed open is tried again by the next request.
    admin.catch(() => (admin = null));
    const [opened] = await Promise.all([admin, syncAll(ctx)]);
    return opened;
  };
  return {
    'poisoned.list': async (req) => ({ tasks: (await ready()).list(req.runId) }),
    'poisoned.show': async (req) => (await ready()).show(keyOf(req.runId, req.taskId)),
    'poisoned.retry': async (req) => (await ready()).retry(keyOf(req.runId, req.taskId), req.by),
    'poisoned.cancel': async (req) =>
      (await ready()).cancel(keyOf(req.runId, req.taskId), req.reason),
  };
}
