/**
 * A backend process whose finalizer hangs in its sink for 60 s (bounded shutdown):
 * `node --import tsx test/helpers/stuck-sink-backend-main.ts`, configured by SONAR_* env.
 * It prints `sink write started <runId>.<taskId>` on stdout when a job reaches the sink,
 * and runs `serveUntilSignal`, the code `sonar backend` runs on SIGTERM.
 */
import { finalizerPool } from '../../src/backend/finalize/finalizer-pool.js';
import { serveUntilSignal } from '../../src/backend/serve-until-signal.js';
import { createLogger } from '../../src/log.js';
import type { ResultRecord, ResultsSink, UpsertOutcome } from '../../src/storage/results-sink.js';
import { startBackend } from './test-backend.js';

const SINK_WRITE_MS = 60_000;

const stuckSink: ResultsSink = {
  async upsert(record: ResultRecord): Promise<UpsertOutcome> {
    process.stdout.write(`sink write started ${record.runId}.${record.taskId}\n`);
    await new Promise((resolve) => setTimeout(resolve, SINK_WRITE_MS));
    return 'written';
  },
};

const { backend, config } = await startBackend({
  env: process.env,
  log: createLogger({ component: 'backend' }),
  handlers: 'none',
  components: [finalizerPool({ sink: stuckSink, size: 1 })],
});
// Said once SIGTERM is handled: serveUntilSignal installs its handlers before its first
// await. Said before, a test that signals on this line could find the process descheduled
// between the line and the handlers, and end it the default way.
const serving = serveUntilSignal(backend, { graceMs: config.stopGraceMs });
process.stdout.write('backend started\n');
await serving;
