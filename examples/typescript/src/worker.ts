// A worker for the `words` tag: one handler per step. It runs until SIGTERM or SIGINT (Ctrl-C),
// which drain it: running tasks finish, then it leaves.
import { createLogger, createWorker, loadConfig, SonarClient, step } from '@sonar-dispatch/sonar';
import { countInput, TAG } from './words.js';
import type { CountOutput, ReportOutput } from './words.js';

// SONAR_NATS_URL, SONAR_PREFIX, SONAR_NATS_CREDS...: the same settings as the `sonar` command.
const config = loadConfig();
// The `report` step reads what the `count` step stored.
const client = await SonarClient.fromEnv();

const worker = createWorker({
  tags: [TAG],
  slots: 4,
  // This worker runs its handlers only, never a command a task carries.
  commands: 'none',
  connection: config,
  prefix: config.prefix,
  log: createLogger(),
  handlers: {
    // The schema is checked first: a task whose input it refuses fails for good, naming the
    // field, and the handler gets the typed input.
    count: step({
      schema: countInput,
      handler: ({ text }): CountOutput => {
        const words = text.split(/\s+/).filter((w) => w !== '');
        const longest = words.reduce((a, b) => (b.length > a.length ? b : a), '');
        return { words: words.length, longest };
      },
    }),
    report: async (_input, { runId, signal }): Promise<ReportOutput> => {
      const counted = (await client.results(runId)).filter((r) => r.stepId === 'count');
      const report: ReportOutput = { texts: 0, words: 0, longest: '' };
      for (const r of counted) {
        signal.throwIfAborted();
        const out = (await client.output(runId, r.taskId)) as CountOutput;
        report.texts += 1;
        report.words += out.words;
        if (out.longest.length > report.longest.length) report.longest = out.longest;
      }
      return report;
    },
  },
});

try {
  await worker.run();
} finally {
  await client.close();
}
