/**
 * The typed worker SDK end to end (a real backend with its reconciler and finalizers): input
 * schemas, the output kind the dispatch message carries, handlers per step, and `run()`
 * draining on SIGTERM.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SonarClient } from '../../src/client/client.js';
import type { WorkerOptions } from '../../src/worker/options.js';
import { step } from '../../src/worker/handler-routing.js';
import { createWorker } from '../../src/worker/worker.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { spawnNode } from '../helpers/sonar-process.js';
import { eventsOf } from '../helpers/worker-fixtures.js';

const nats = serverPerFile();
const backends = backendPerTest(nats);

async function world<I, O>(opts: Pick<WorkerOptions<I, O>, 'handler' | 'schema' | 'handlers'>) {
  const tb = await backends.start({}, { reconciler: true });
  const prefix = tb.ctx.names.prefix;
  const client = new SonarClient(nats.nc, { prefix });
  const worker = createWorker<I, O>({
    tags: ['a'],
    slots: 2,
    nc: nats.nc,
    prefix,
    drainGraceMs: '2s',
    ...opts,
  });
  backends.drainAfter(worker);
  await worker.start();
  /** The attempt failures of a task, as its events say. */
  const failures = async (runId: string, taskId: string) =>
    (await eventsOf(tb.ctx, tb.ctx.names.subjects.task(runId, taskId)))
      .filter((e) => e.type === 'TaskAttemptFailed')
      .map((e) => e.data as { error: string; retryable: boolean });
  const types = async (runId: string, taskId: string) =>
    (await eventsOf(tb.ctx, tb.ctx.names.subjects.task(runId, taskId))).map((e) => e.type);
  return { tb, client, prefix, failures, types };
}

const resize = z.object({ size: z.number().int().min(1), name: z.string() });

describe('the typed worker SDK', () => {
  it('runs a handler only on an input its schema accepts; a refused one fails for good, naming the field', async () => {
    const seen: { size: number; name: string }[] = [];
    const { client, failures } = await world({
      schema: resize,
      handler: (input) => {
        seen.push(input); // typed: { size: number; name: string }
        return { area: input.size * input.size };
      },
    });
    await client.submit({
      runId: 'r1',
      steps: [
        {
          id: 's',
          tags: ['a'],
          output: 'json',
          tasks: [
            { id: 'good', input: { size: 3, name: 'x' } },
            { id: 'bad', input: { size: 'big', name: 'y' }, maxAttempts: 3 },
          ],
        },
      ],
    });
    const status = await client.wait('r1', { timeoutMs: 30_000 });
    expect(status.state).toBe('Failed');
    expect(status.tasks).toEqual({ Succeeded: 1, Failed: 1 });
    expect(await client.output('r1', 'good')).toEqual({ area: 9 });
    expect(seen).toEqual([{ size: 3, name: 'x' }]);
    // One attempt only, though three were allowed: the same input would fail every one.
    const failed = await failures('r1', 'bad');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ retryable: false });
    expect(failed[0]!.error).toMatch(/^input refused by the worker's schema: input\.size: /);
  });

  it('fails an attempt whose result is not the JSON its step declares, and poisons nothing', async () => {
    const { client, failures, types } = await world({
      handler: (input) =>
        input === 'text' ? 'plain words' : input === 'raw' ? new Uint8Array([0xff]) : { ok: 1 },
    });
    await client.submit({
      runId: 'r2',
      steps: [
        {
          id: 's',
          tags: ['a'],
          output: 'json',
          tasks: [
            { id: 'text', input: 'text', maxAttempts: 3 },
            { id: 'raw', input: 'raw' },
            { id: 'fine', input: 'fine' },
          ],
        },
        // A bytes step takes anything.
        { id: 'b', tags: ['a'], tasks: [{ id: 'any', input: 'text' }] },
      ],
    });
    const status = await client.wait('r2', { timeoutMs: 30_000 });
    expect(status.tasks).toEqual({ Failed: 2, Succeeded: 2 });
    const text = await failures('r2', 'text');
    expect(text).toHaveLength(1);
    expect(text[0]).toMatchObject({ retryable: false });
    expect(text[0]!.error).toMatch(
      /^the step's output is json, but the handler returned a string \("plain words"\), which is not JSON/,
    );
    expect((await failures('r2', 'raw'))[0]!.error).toMatch(/returned 1 bytes, which is not JSON/);
    for (const t of ['text', 'raw']) expect(await types('r2', t)).not.toContain('TaskPoisoned');
    expect(status.steps['s']).toBe('Failed');
    expect(new TextDecoder().decode((await client.output('r2', 'any')) as Uint8Array)).toBe(
      'plain words',
    );
  });

  it('routes each task to its step handler; a step without one fails, retryably, naming it', async () => {
    const { client, failures } = await world({
      handlers: {
        double: (input: number) => input * 2,
        greet: step({
          schema: z.object({ who: z.string() }),
          handler: ({ who }) => `hello ${who}`,
        }),
      },
    });
    await client.submit({
      runId: 'r3',
      steps: [
        { id: 'double', tags: ['a'], output: 'json', tasks: [{ id: 'd', input: 21 }] },
        { id: 'greet', tags: ['a'], tasks: [{ id: 'g', input: { who: 'you' } }] },
        { id: 'other', tags: ['a'], tasks: [{ id: 'o', maxAttempts: 2 }] },
      ],
    });
    const status = await client.wait('r3', { timeoutMs: 30_000 });
    expect(status.steps).toEqual({ double: 'Succeeded', greet: 'Succeeded', other: 'Failed' });
    expect(await client.output('r3', 'd')).toBe(42);
    expect(new TextDecoder().decode((await client.output('r3', 'g')) as Uint8Array)).toBe(
      'hello you',
    );
    const other = await failures('r3', 'o');
    expect(other.map((f) => f.retryable)).toEqual([true, true]);
    expect(other[0]!.error).toBe(
      'no handler for step other on this worker (it has: double, greet)',
    );
  });

  it('refuses options with both or neither of handler and handlers, naming the field', () => {
    const base = { tags: ['a'], nc: nats.nc };
    expect(() => createWorker(base)).toThrow(/'handler' give `handler`/);
    expect(() => createWorker({ ...base, handler: () => 1, handlers: { s: () => 1 } })).toThrow(
      /'handler'/,
    );
    expect(() => createWorker({ ...base, handlers: {} })).toThrow(
      /'handlers' needs at least one step id/,
    );
    expect(() => createWorker({ ...base, handlers: { s: () => 1 }, schema: resize })).toThrow(
      /'schema'/,
    );
  });

  it('run() drains on SIGTERM: the running task finishes, the process exits 0', async () => {
    const tb = await backends.start({}, { reconciler: true });
    const prefix = tb.ctx.names.prefix;
    const client = new SonarClient(nats.nc, { prefix });
    const p = spawnNode('sdk-worker', ['--import', 'tsx', 'test/helpers/sdk-worker-main.ts'], {
      SONAR_NATS_URL: nats.server.url,
      SONAR_PREFIX: prefix,
      SDK_TASK_MS: '1500',
    });
    await client.submit({
      runId: 'r4',
      steps: [{ id: 's', tags: ['a'], output: 'json', tasks: [{ id: 't', input: 7 }] }],
    });
    await eventually(() => p.stdout().includes('task started'), { timeoutMs: 30_000 });
    p.child.kill('SIGTERM');
    const exit = await p.exited;
    expect(exit, p.stderr()).toEqual({ code: 0, signal: null });
    expect(p.stdout()).toMatch(/worker ended Stopped/);
    const status = await client.wait('r4', { timeoutMs: 30_000 });
    expect(status.state).toBe('Succeeded');
    expect(await client.output('r4', 't')).toBe(7);
  });
});
