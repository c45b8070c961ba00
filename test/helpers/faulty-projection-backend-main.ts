/**
 * `sonar backend` with one fault hook, for tests only: on SIGUSR2 its projection loop stops
 * with an error, as when its consumer fails for good. Run as
 * `node --import tsx test/helpers/faulty-projection-backend-main.ts`, configured by SONAR_*
 * env. The hook throws from an applied-event listener: the loop's consumer calls it from its
 * message callback, and a callback that throws ends the consumer with that error
 * (ProjectionLoop.start → EventStore.followEach → `closed`), the path a real failure takes.
 * The rest is what `sonar backend` runs (src/cli/commands/backend.ts).
 */
import { serveUntilSignal } from '../../src/backend/serve-until-signal.js';
import { createLogger } from '../../src/log.js';
import { startBackend } from './test-backend.js';

const { backend, config } = await startBackend({
  env: process.env,
  log: createLogger({ component: 'backend' }),
});
process.once('SIGUSR2', () => {
  backend.ctx.loop.onApplied(() => {
    throw new Error('fault injected by SIGUSR2');
  });
});
await serveUntilSignal(backend, { graceMs: config.stopGraceMs });
