/**
 * A user's worker program: `createWorker(...).run()` and nothing else, no signal handling of
 * its own. Each task sleeps SDK_TASK_MS, then returns its input; it prints `task started`
 * as each begins, so a test knows when to signal.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createWorker } from '../../src/index.js';

const worker = createWorker({
  tags: ['a'],
  connection: { natsUrl: process.env['SONAR_NATS_URL']! },
  prefix: process.env['SONAR_PREFIX']!,
  drainGraceMs: '20s',
  handler: async (input: unknown) => {
    process.stdout.write('task started\n');
    await delay(Number(process.env['SDK_TASK_MS']));
    return input;
  },
});
await worker.run();
process.stdout.write(`worker ended ${worker.state}\n`);
