import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BackendContext } from '../../src/backend/context.js';
import { SonarClient } from '../../src/client/client.js';
import { runCommand } from '../../src/worker/task-runner.js';
import type { TaskHandler } from '../../src/worker/options.js';
import { createWorker } from '../../src/worker/worker.js';
import { eventually } from '../helpers/eventually.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { tempDirPerFile } from '../helpers/temp-dir-per-file.js';
import { eventsOf, spawnWorker, taskOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);
const dir = tempDirPerFile('sonar-commands');

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/** The reconciler runs: the run must end on its own, as it would in production. */
async function world() {
  const tb = await backends.start({}, { reconciler: true });
  const { ctx } = tb;
  const client = new SonarClient(nats.nc, { prefix: ctx.names.prefix });
  return { tb, ctx, client };
}

const runEnded = (ctx: BackendContext, runId: string) =>
  eventually(
    () => {
      const state = ctx.loop.projection.runs.get(runId)?.snapshot.value;
      return state === 'Succeeded' || state === 'Failed' ? state : false;
    },
    { timeoutMs: 30_000, message: `run ${runId} ended` },
  );

/** The one TaskAttemptFailed of a task (a refusal is never retried). */
async function failuresOf(ctx: BackendContext, runId: string, taskId: string) {
  return (await eventsOf(ctx, ctx.names.subjects.task(runId, taskId)))
    .filter((e) => e.type === 'TaskAttemptFailed')
    .map((e) => e.data as { exitCode: number; error: string; retryable: boolean });
}

describe('a worker restricted to its handler (commands: none)', () => {
  it('fails a task that carries a command for good, runs nothing, and the run ends Failed', async () => {
    const { ctx, client } = await world();
    const marker = join(dir(), 'none-marker');
    // A handler that runs the task's command when it has one, as `sonar worker` does: only
    // the setting stands between the task and the shell.
    const handler: TaskHandler = (input, t) =>
      t.command
        ? runCommand(t.command, { input, signal: t.signal, maxOutputBytes: 1024 })
        : 'handled';
    const w = createWorker({
      tags: ['locked'],
      nc: nats.nc,
      prefix: ctx.names.prefix,
      commands: 'none',
      handler,
      drainGraceMs: '2s',
    });
    backends.drainAfter(w);
    await w.start();
    await client.submit({
      runId: 'r-none',
      steps: [
        {
          id: 's',
          tags: ['locked'],
          tasks: [
            { id: 'cmd', command: ['sh', '-c', `touch ${marker}`], maxAttempts: 3 },
            { id: 'plain', input: { x: 1 } },
          ],
        },
      ],
    });
    expect(await runEnded(ctx, 'r-none')).toBe('Failed');
    const cmd = taskOf(ctx, 'r-none', 'cmd');
    expect(cmd.value).toBe('Failed');
    expect(cmd.context.attempt).toBe(1); // not retried on this worker or any other
    expect(cmd.context.error).toBe(
      `task command ["sh","-c","touch ${marker}"] refused: this worker runs no task commands (SONAR_WORKER_COMMANDS=none)`,
    );
    expect(await failuresOf(ctx, 'r-none', 'cmd')).toEqual([
      expect.objectContaining({ exitCode: -1, retryable: false }),
    ]);
    expect(taskOf(ctx, 'r-none', 'plain').value).toBe('Succeeded');
    expect(ctx.loop.projection.steps.get('r-none.s')?.snapshot.value).toBe('Failed');
    expect(await exists(marker)).toBe(false);
    expect(w.state).toBe('Running'); // the refusal is the task's failure, not the worker's
  });
});

describe('sonar worker with an allow-list (SONAR_WORKER_COMMANDS)', () => {
  it('runs a command whose command[0] is listed exactly, and refuses any other', async () => {
    const { tb, ctx, client } = await world();
    const ran = join(dir(), 'allowed-marker');
    const refused = join(dir(), 'refused-marker');
    const worker = spawnWorker(tb.env, ['--worker-id', 'wl', '--tags', 'allow', '--slots', '2'], {
      SONAR_WORKER_COMMANDS: '/bin/sh,/bin/true',
    });
    await client.submit({
      runId: 'r-allow',
      steps: [
        {
          id: 's',
          tags: ['allow'],
          tasks: [
            { id: 'listed', command: ['/bin/sh', '-c', `touch ${ran}; echo ok`] },
            // The same shell by name: the match is exact, so it is refused.
            { id: 'unlisted', command: ['sh', '-c', `touch ${refused}`] },
          ],
        },
      ],
    });
    expect(await runEnded(ctx, 'r-allow')).toBe('Failed');
    expect(taskOf(ctx, 'r-allow', 'listed').value).toBe('Succeeded');
    expect(await exists(ran)).toBe(true);
    const unlisted = taskOf(ctx, 'r-allow', 'unlisted');
    expect(unlisted.value).toBe('Failed');
    expect(unlisted.context.error).toBe(
      `task command ["sh","-c","touch ${refused}"] refused: "sh" is not allowed by this worker (SONAR_WORKER_COMMANDS=/bin/sh,/bin/true)`,
    );
    expect(await failuresOf(ctx, 'r-allow', 'unlisted')).toEqual([
      expect.objectContaining({ exitCode: -1, retryable: false }),
    ]);
    expect(await exists(refused)).toBe(false);
    expect(worker.stderr()).toContain('task command refused');
  });

  it('with --commands none and `-- CMD`, refuses task commands and runs its own for the rest', async () => {
    const { tb, ctx, client } = await world();
    const marker = join(dir(), 'fixed-marker');
    spawnWorker(tb.env, [
      '--worker-id',
      'wf',
      '--tags',
      'fixed',
      '--commands',
      'none',
      '--',
      'cat',
    ]);
    await client.submit({
      runId: 'r-fixed',
      steps: [
        {
          id: 's',
          tags: ['fixed'],
          tasks: [
            { id: 'cmd', command: ['sh', '-c', `touch ${marker}`] },
            { id: 'plain', input: { y: 2 } },
          ],
        },
      ],
    });
    expect(await runEnded(ctx, 'r-fixed')).toBe('Failed');
    expect(taskOf(ctx, 'r-fixed', 'cmd').context.error).toContain(
      'refused: this worker runs no task commands (SONAR_WORKER_COMMANDS=none)',
    );
    expect(taskOf(ctx, 'r-fixed', 'plain').value).toBe('Succeeded');
    expect(await exists(marker)).toBe(false);
  });

  it('refuses to start with none and no `-- CMD`, and a bad value, naming the setting', async () => {
    const none = spawnWorker({}, ['--tags', 'x', '--commands', 'none']);
    expect((await none.exited).code).toBe(2);
    expect(none.stderr()).toContain(
      'SONAR_WORKER_COMMANDS (--commands) is none but no `-- CMD` was given: this worker could run no task',
    );
    const bad = spawnWorker({}, ['--tags', 'x'], { SONAR_WORKER_COMMANDS: 'bin/sh' });
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr()).toContain(
      'SONAR_WORKER_COMMANDS: "bin/sh" is not a command setting: entry "bin/sh" is neither a name (no /) nor an absolute path',
    );
  });
});
