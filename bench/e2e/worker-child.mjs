/**
 * One bench worker process: `worker-child.mjs <url> <prefix> <slots> <workerId>`. The handler
 * is trivial (a 2-byte output, inline) unless the input asks it to hold the task
 * (`{"holdMs": n}`, for the recovery measurement); a cancel aborts the hold. Prints `ready`
 * once joined; SIGTERM drains.
 *
 * Plain JavaScript on the compiled package, imported by its name, as a user's worker runs:
 * no TypeScript loader in the measured process (bench/e2e.ts builds dist/ first).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createLogger, createWorker } from '@sonar-dispatch/sonar';

const [url, prefix, slots, workerId] = process.argv.slice(2);

const worker = createWorker({
  tags: ['bench'],
  slots: Number(slots),
  workerId,
  prefix,
  connection: { natsUrl: url },
  log: createLogger({ level: 'warn' }),
  handler: async (input, ctx) => {
    const holdMs = input?.holdMs;
    if (holdMs !== undefined) await delay(holdMs, undefined, { signal: ctx.signal });
    return 'ok';
  },
});
process.once('SIGTERM', () => void worker.drain('shutdown').catch(() => {}));
await worker.start();
console.log('ready');
await worker.done.catch(() => {});
