// Submits a `words` run, waits for its end and prints each task's output.
// `node dist/client.js [RUN_ID]`: exit 0 when the run succeeded, 1 otherwise.
import { SonarClient } from '@sonar-dispatch/sonar';
import { wordsRun } from './words.js';

const runId = process.argv[2] ?? `words-${Date.now()}`;
const texts = [
  'Sonar hands tasks to fleets of disposable workers',
  'chosen by routing tags',
  'and work lost with a worker never holds capacity forever',
];

// SONAR_NATS_URL (default nats://127.0.0.1:4222), SONAR_PREFIX, SONAR_NATS_CREDS...
const client = await SonarClient.fromEnv();
try {
  const submitted = await client.submit(wordsRun(runId, texts));
  console.log(`submitted ${submitted.runId}: ${submitted.taskCount} tasks`);

  const status = await client.wait(runId, { timeoutMs: 120_000 });
  console.log(`run ${runId} ${status.state}: ${JSON.stringify(status.tasks)}`);

  for (const r of await client.results(runId)) {
    const output = await client.output(runId, r.taskId);
    console.log(`${r.stepId}.${r.taskId} ${JSON.stringify(output)}`);
  }
  process.exitCode = status.state === 'Succeeded' ? 0 : 1;
} finally {
  await client.close();
}
