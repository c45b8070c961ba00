/**
 * The client SDK against a real backend (reconciler and finalizers included) and an
 * in-process worker: `wait`, `watch`, `results`, `output`, `fromEnv`, and the types `submit`
 * takes.
 */
import { describe, expect, it } from 'vitest';
import { SonarClient } from '../../src/client/client.js';
import type { RunUpdate } from '../../src/client/client.js';
import type { RunFile } from '../../src/protocol.js';
import type { TaskHandler } from '../../src/worker/options.js';
import { createWorker } from '../../src/worker/worker.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { spawnSonar } from '../helpers/sonar-process.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

async function world(handler: TaskHandler = (input) => input) {
  const tb = await backends.start({}, { reconciler: true });
  const prefix = tb.ctx.names.prefix;
  const client = new SonarClient(nats.nc, { prefix });
  const worker = createWorker({
    tags: ['a'],
    slots: 2,
    nc: nats.nc,
    prefix,
    drainGraceMs: '2s',
    handler,
  });
  backends.drainAfter(worker);
  await worker.start();
  return { tb, client, prefix };
}

/** Two steps, `b` after `a`: a json step of 3 tasks and a bytes step of 1. */
const twoSteps = (runId: string): RunFile => ({
  runId,
  steps: [
    {
      id: 'a',
      tags: ['a'],
      output: 'json',
      tasks: [0, 1, 2].map((n) => ({ id: `a${n}`, input: { n } })),
    },
    { id: 'b', tags: ['a'], after: ['a'], tasks: [{ id: 'b0', input: 'bytes out' }] },
  ],
});

describe('SonarClient', () => {
  it('wait() resolves to the final status once the run has ended', async () => {
    const { client } = await world();
    await client.submit(twoSteps('r1'));
    const status = await client.wait('r1', { timeoutMs: 30_000 });
    expect(status).toMatchObject({
      runId: 'r1',
      state: 'Succeeded',
      taskCount: 4,
      steps: { a: 'Succeeded', b: 'Succeeded' },
      tasks: { Succeeded: 4 },
    });
    expect(status.endedAt).not.toBeNull();
    // An ended run: wait answers at once, as does status.
    expect(await client.wait('r1')).toEqual(status);
    expect(await client.status('r1')).toEqual(status);
  });

  it('watch() yields the run so far, then each batch of events, and ends with the run', async () => {
    const { client } = await world();
    await client.submit(twoSteps('r2'));
    const updates: RunUpdate[] = [];
    for await (const u of client.watch('r2')) updates.push(u);
    const last = updates.at(-1)!;
    expect(last.status.state).toBe('Succeeded');
    expect(last.status.tasks).toEqual({ Succeeded: 4 });
    // Every event of the run, each once, in log order, across the updates.
    const seqs = updates.flatMap((u) => u.events.map((e) => e.seq));
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(seqs.length);
    const types = updates.flatMap((u) => u.events.map((e) => e.type));
    expect(types.filter((t) => t === 'TaskFinalized')).toHaveLength(4);
    expect(types).toContain('RunSucceeded');
    // Only the state before the end says Running.
    expect(updates.slice(0, -1).every((u) => u.status.state !== 'Succeeded')).toBe(true);
    // A watch of an ended run gives one update with its whole history.
    const again: RunUpdate[] = [];
    for await (const u of client.watch('r2')) again.push(u);
    expect(again).toHaveLength(1);
    expect(again[0]!.events.map((e) => e.seq)).toEqual(seqs);
  });

  it('results() lists what was stored; output() gives parsed JSON or bytes', async () => {
    const { client } = await world((input) =>
      typeof input === 'string'
        ? new TextEncoder().encode(input)
        : { doubled: (input as { n: number }).n * 2 },
    );
    await client.submit(twoSteps('r3'));
    await client.wait('r3', { timeoutMs: 30_000 });
    const results = await client.results('r3');
    expect(results.map((r) => `${r.stepId}.${r.taskId}:${r.kind}`)).toEqual([
      'a.a0:json',
      'a.a1:json',
      'a.a2:json',
      'b.b0:bytes',
    ]);
    expect(await client.output('r3', 'a2')).toEqual({ doubled: 4 });
    const bytes = await client.output('r3', 'b0');
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect(new TextDecoder().decode(bytes as Uint8Array)).toBe('bytes out');
    await expect(client.output('r3', 'nope')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('wait() with a timeout rejects with `timeout`, naming the state; a signal aborts it', async () => {
    const tb = await backends.start({}, { reconciler: true });
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix });
    // No worker serves tag `z`: the run stays Running.
    await client.submit({ runId: 'r4', steps: [{ id: 's', tags: ['z'], tasks: [{ id: 't' }] }] });
    await expect(client.wait('r4', { timeoutMs: 300 })).rejects.toMatchObject({
      code: 'timeout',
      message: 'run r4 did not end within 300 ms (it is Running)',
    });
    const ac = new AbortController();
    const waiting = client.wait('r4', { signal: ac.signal });
    ac.abort(new Error('given up'));
    await expect(waiting).rejects.toThrow('given up');
    expect(await client.wait('r4', { timeoutMs: 0 }).catch((e: Error) => e.message)).toMatch(
      /within 0 ms/,
    );
  });

  it('fromEnv() connects with the SONAR_* variables the CLI reads', async () => {
    const { prefix } = await world();
    const client = await SonarClient.fromEnv({
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: prefix,
    });
    try {
      await client.submit({
        runId: 'r5',
        steps: [{ id: 's', tags: ['a'], tasks: [{ id: 't', input: 1 }] }],
      });
      expect((await client.wait('r5', { timeoutMs: 30_000 })).state).toBe('Succeeded');
    } finally {
      await client.close();
    }
    await expect(
      SonarClient.fromEnv({ SONAR_NATS_URL: nats.server.url, SONAR_PREFIX: 'no good' }),
    ).rejects.toThrow(/SONAR_PREFIX/);
  });

  it('on a prefix no backend provisioned, says so in one line: SDK and CLI alike', async () => {
    const client = new SonarClient(nats.nc, { prefix: 'nobody_here' });
    const line = /^no Sonar streams under prefix "nobody_here" on this server: start a backend/;
    await expect(client.status('r1')).rejects.toMatchObject({
      code: 'not_found',
      message: expect.stringMatching(line),
    });
    await expect(client.results('r1')).rejects.toMatchObject({ code: 'not_found' });
    for (const args of [['status', '--run', 'r1'], ['results', 'r1'], ['tail']]) {
      const p = spawnSonar(
        'no-streams',
        [...args, '--server', nats.server.url, '--prefix', 'nobody_here'],
        {},
      );
      const exit = await p.exited;
      expect(exit.code, p.stderr()).toBe(1);
      expect(p.stderr()).toMatch(
        /^sonar: no Sonar streams under prefix "nobody_here" on this server/m,
      );
    }
  });
});

/**
 * `submit` takes a RunFile: a misspelt field does not compile. Checked by `npm run typecheck`
 * (part of `npm test`), where an `@ts-expect-error` with no error under it is itself an error.
 */
export function submitTypeErrors(client: SonarClient): void {
  // @ts-expect-error `runID` is not `runId`
  void client.submit({ runID: 'x', steps: [] });
  // @ts-expect-error `stepz` is not `steps`
  void client.submit({ runId: 'x', stepz: [] });
  // @ts-expect-error a step's output kind is `json` or `bytes`
  void client.submit({ runId: 'x', steps: [{ id: 's', tags: ['a'], output: 'text', tasks: [] }] });
}
