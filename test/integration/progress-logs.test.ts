/**
 * Progress and logs end to end, against a real backend with its reconciler: a handler's
 * `ctx.progress()` reaches `watch()` and `progress()`, its `ctx.log()` and a command's
 * stderr reach `logs()` and `sonar logs` (live with `--follow`). Who may report them:
 * api-worker.test.ts.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import type { LogChunk } from '../../src/client/client.js';
import { createWorker } from '../../src/worker/worker.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { startDashboardBackend } from '../helpers/dashboard-fixtures.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { tempDirPerFile } from '../helpers/temp-dir-per-file.js';
import { runSonar, spawnSonar } from '../helpers/sonar-process.js';
import { spawnShellWorker } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);
const dir = tempDirPerFile('sonar-progress-logs');

const oneTask = (runId: string, tags = ['a']) => ({
  runId,
  steps: [{ id: 's', tags, tasks: [{ id: 't1' }] }],
});

async function textOf(chunks: AsyncIterable<LogChunk>): Promise<string> {
  let text = '';
  for await (const c of chunks) text += c.text;
  return text;
}

describe('progress and logs', () => {
  it("a handler's progress reaches watch(), progress() and the task page, and its log logs()", async () => {
    const tb = await startDashboardBackend(nats.server.url, nats.nc, { reconciler: true });
    onTestFinished(() => tb.stop());
    const prefix = tb.ctx.names.prefix;
    const client = new SonarClient(nats.nc, { prefix });
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const worker = createWorker({
      tags: ['a'],
      nc: nats.nc,
      prefix,
      drainGraceMs: '2s',
      handler: async (_input, ctx) => {
        ctx.log('starting\n');
        ctx.progress({ done: 1, total: 2 });
        ctx.log('half way\n', 'stdout');
        await finished;
        return 'ok';
      },
    });
    backends.drainAfter(worker);
    await worker.start();
    await client.submit(oneTask('r1'));

    const seen: unknown[] = [];
    for await (const u of client.watch('r1')) {
      for (const p of u.progress) {
        expect(p).toMatchObject({
          runId: 'r1',
          taskId: 't1',
          attempt: 1,
          workerId: worker.workerId,
        });
        seen.push(p.value);
        finish();
      }
    }
    expect(seen).toEqual([{ done: 1, total: 2 }]);
    const page = await (await fetch(`${tb.url}/tasks/r1/t1`)).text();
    expect(page).toContain(
      '<span id="task-progress" class="mono">{&quot;done&quot;:1,&quot;total&quot;:2}</span>',
    );
    expect(page).toMatch(/<pre id="task-log" class="log">starting\nhalf way\n<\/pre>/);
    expect((await client.progress('r1')).get('t1')?.value).toEqual({ done: 1, total: 2 });

    const chunks: LogChunk[] = [];
    for await (const c of client.logs('r1', 't1')) chunks.push(c);
    // Pieces keep their stream and order, in one numbered chunk per flush.
    expect(chunks.map((c) => [c.stream, c.text, c.seq])).toEqual([
      ['stderr', 'starting\n', 1],
      ['stdout', 'half way\n', 1],
    ]);
    await expect(textOf(client.logs('r1', 't1', { attempt: 2 }))).rejects.toThrow(
      /has no attempt 2 \(it has 1 to 1\)/,
    );
  });

  it("sonar logs prints a command's stderr, and --follow streams it while the task runs", async () => {
    const tb = await backends.start({}, { reconciler: true });
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    const gate = join(dir(), 'gate');
    const worker = spawnShellWorker(
      tb.env,
      1,
      `echo first line >&2; echo "sonar-progress: 0.5" >&2; while [ ! -e ${gate} ]; do sleep 0.1; done; echo last line >&2; echo '"done"'`,
    );
    const runFile = join(dir(), 'r3.json');
    await writeFile(runFile, JSON.stringify(oneTask('r3', ['linux'])));
    const submit = spawnSonar('submit-wait', ['submit', runFile, '--wait'], tb.env);

    await eventually(() => submit.stdout().includes('submitted run r3'), {
      timeoutMs: 20_000,
      message: 'the run was submitted',
    });
    const follower = spawnSonar('logs-follow', ['logs', 'r3', 't1', '--follow'], tb.env);
    await eventually(
      () => follower.stdout().includes('first line') || follower.stderr().includes('sonar:'),
      {
        timeoutMs: 20_000,
        message: 'the follower printed the first line while the task ran',
      },
    );
    expect(follower.stderr()).toBe('');
    expect(follower.running).toBe(true);
    await eventually(async () => (await client.progress('r3')).get('t1')?.value === 0.5, {
      timeoutMs: 10_000,
      message: "the command's progress line was stored",
    });
    await eventually(() => submit.stdout().includes('  t1  0.5\n'), {
      timeoutMs: 20_000,
      message: 'submit --wait showed the running task its progress',
    });
    const status = await runSonar('status', ['status', '--run', 'r3', '--json'], tb.env);
    const view = JSON.parse(status.stdout) as {
      runs: Record<string, { progress?: Record<string, { value: unknown }> }>;
    };
    expect(view.runs['r3']?.progress?.['t1']?.value).toBe(0.5);
    const text = await runSonar('status-text', ['status', '--run', 'r3'], tb.env);
    expect(text.stdout).toMatch(/progress t1 {2}0\.5 {2}\(\d+s ago\)/);
    await writeFile(gate, '');
    expect((await follower.exited).code).toBe(0);
    // stderr only: stdout is the task's output, which readers of logs may not be allowed.
    expect(follower.stdout()).toBe('first line\nsonar-progress: 0.5\nlast line\n');

    expect((await submit.exited).code).toBe(0);
    const once = await runSonar('logs', ['logs', 'r3', 't1'], tb.env);
    expect(once.code).toBe(0);
    expect(once.stdout).toContain('first line\n');
    const json = await runSonar('logs-json', ['logs', 'r3', 't1', '--json'], tb.env);
    const lines = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LogChunk);
    expect(lines.at(-1)).toMatchObject({ attempt: 1, stream: 'stderr', text: 'last line\n' });
    const bad = await runSonar('logs-bad', ['logs', 'r3', 't1', '--attempt', 'x'], tb.env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--attempt: "x" is not a whole number >= 1');
    worker.child.kill('SIGTERM');
    await worker.exited;
  });
});
