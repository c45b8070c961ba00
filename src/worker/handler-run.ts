import type { HandlerContext, TaskHandler } from './options.js';

/** How a handler ended: its value, or what it threw. */
export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs a handler once. Once `ctx.signal` fires, the handler has `abandonAfterMs` to stop;
 * after that it is abandoned (an error outcome), so a handler that ignores its signal cannot
 * hold a slot or a drain forever. A command is SIGKILLed before then (task-runner).
 */
export async function runHandler(
  handler: TaskHandler,
  input: unknown,
  ctx: HandlerContext,
  abandonAfterMs: number,
): Promise<Outcome> {
  let abandon: NodeJS.Timeout | undefined;
  const abandoned = new Promise<Outcome>((resolve) => {
    const onAbort = (): void => {
      abandon = setTimeout(
        () => resolve({ ok: false, error: new Error('the handler did not stop after its abort') }),
        abandonAfterMs,
      );
    };
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
  const run = Promise.resolve()
    .then(() => handler(input, ctx))
    .then(
      (value): Outcome => ({ ok: true, value }),
      (error: unknown): Outcome => ({ ok: false, error }),
    );
  try {
    return await Promise.race([run, abandoned]);
  } finally {
    clearTimeout(abandon);
  }
}
