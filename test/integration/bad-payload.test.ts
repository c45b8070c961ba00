/**
 * A refused API request writes nothing: random and mutated payloads, and payloads
 * that pass their schema but fail a deeper check (a cycle in `after`, an oversized input, a
 * chunk with one bad task among good ones), sent to a real backend. Every one is answered
 * with an error, and no stream or bucket moves: no partial write.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { SonarClient } from '../../src/client/client.js';
import { requestSchemas } from '../../src/protocol.js';
import type { Verb } from '../../src/protocol.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { startTestBackend } from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { VALID_REQUESTS, attempt } from '../helpers/valid-requests.js';

const nats = serverPerFile();
let tb: TestBackend;

beforeAll(async () => {
  tb = await startTestBackend(nats.server.url, nats.nc, { SONAR_MAX_INPUT: '1KiB' });
});
afterAll(async () => {
  await tb?.stop();
});

/** The last sequence of every stream of the topology: any write moves one. */
async function watermark(): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nats.nc);
  const n = tb.ctx.names;
  const streams = [
    ...Object.values(n.streams),
    ...Object.values(n.buckets).map((b) => `KV_${b}`),
    ...Object.values(n.objectStores).map((o) => `OBJ_${o}`),
  ];
  const out: Record<string, number> = {};
  for (const s of streams) out[s] = (await jsm.streams.info(s)).state.last_seq;
  // The leader lock is renewed every tick whatever happens; it is not a write of a request.
  delete out[`KV_${n.buckets.locks}`];
  return out;
}

async function ask(
  verb: string,
  body: unknown,
): Promise<{ ok?: unknown; error?: { code: string } }> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const m = await nats.nc.request(tb.ctx.names.subjects.api(verb), payload, { timeout: 5_000 });
  return m.json();
}

/** One field of a valid payload replaced by something of the wrong kind, or dropped. */
const broken = fc
  .tuple(
    fc.constantFrom(...(Object.keys(VALID_REQUESTS) as Verb[])),
    fc.nat(),
    fc.oneof(fc.jsonValue(), fc.constantFrom('', 'a.b', '*', '>', -1, 1.5, null)),
  )
  .map(([verb, i, value]) => {
    const body = { ...(VALID_REQUESTS[verb] as Record<string, unknown>) };
    const keys = Object.keys(body);
    const key = keys[i % keys.length]!;
    if (i % 5 === 0) delete body[key];
    else body[key] = value;
    return { verb, body };
  })
  // Only what the schema refuses: a valid join would (rightly) write a WorkerJoined.
  .filter(({ verb, body }) => !requestSchemas[verb].safeParse(body).success);

/** Begins run `runId` (one step `s` on tag `x` of `taskCount` tasks): the backend accepts it. */
async function beginSubmit(runId: string, hash: string, taskCount: number): Promise<void> {
  const begun = await ask('submit.begin', {
    runId,
    hash,
    steps: [{ id: 's', tags: ['x'], taskCount }],
    taskCount,
  });
  expect(begun).toHaveProperty('ok');
}

describe('a refused API request leaves no partial write', () => {
  it('150 random schema failures: each refused with `validation`, nothing written', async () => {
    const before = await watermark();
    await fc.assert(
      fc.asyncProperty(broken, async ({ verb, body }) => {
        const reply = await ask(verb, body);
        expect(reply.error?.code, `${verb} ${JSON.stringify(body)}`).toBe('validation');
      }),
      { numRuns: 150 },
    );
    expect(await ask('join', '{"not json')).toMatchObject({ error: { code: 'validation' } });
    expect(await watermark()).toEqual(before);
  });

  it('payloads that pass the schema but fail a deeper check are refused whole', async () => {
    const before = await watermark();
    const begin = (steps: unknown[], taskCount = 1) =>
      ask('submit.begin', { runId: 'deep', hash: 'h1', steps, taskCount });
    // A cycle in `after`, and a step that waits for one that does not exist.
    expect(
      await begin([
        { id: 'a', tags: ['x'], after: ['b'], taskCount: 0 },
        { id: 'b', tags: ['x'], after: ['a'], taskCount: 1 },
      ]),
    ).toMatchObject({ error: { code: 'validation' } });
    expect(await begin([{ id: 'a', tags: ['x'], after: ['ghost'], taskCount: 1 }])).toMatchObject({
      error: { code: 'validation' },
    });
    // A chunk for a run never begun.
    expect(
      await ask('submit.tasks', { runId: 'nobody', stepId: 's', tasks: [{ id: 't' }] }),
    ).toHaveProperty('error');
    // An output whose declared size does not match what it carries.
    expect(
      await ask('result', { ...attempt, output: { inline: 'aGk=', bytes: 99 } }),
    ).toMatchObject({ error: { code: 'validation' } });
    expect(await watermark()).toEqual(before);
  });

  it('a chunk with one bad task among good ones writes none of them', async () => {
    await beginSubmit('chunk', 'h2', 3);
    const before = await watermark();
    const reply = await ask('submit.tasks', {
      runId: 'chunk',
      stepId: 's',
      tasks: [
        { id: 't1', input: { n: 1 } },
        { id: 't2', input: { big: 'x'.repeat(2_048) } },
        { id: 't3', input: { n: 3 } },
      ],
    });
    expect(reply).toMatchObject({ error: { code: 'validation' } });
    expect(await watermark()).toEqual(before);
    // And the same chunk without the bad task is taken whole.
    const fixed = await ask('submit.tasks', {
      runId: 'chunk',
      stepId: 's',
      tasks: [
        { id: 't1', input: { n: 1 } },
        { id: 't2', input: { n: 2 } },
        { id: 't3', input: { n: 3 } },
      ],
    });
    expect(fixed).toHaveProperty('ok');
  });
});

describe('input that blew up inside the backend is refused with `validation`, by field', () => {
  /** `[[...]]`, `levels` deep, as text: JSON.stringify itself overflows on it. */
  const nestedJson = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
  const message = (reply: unknown): string =>
    (reply as { error?: { message?: string } }).error?.message ?? '';

  it('a hash holding CR, LF or anything but [A-Za-z0-9_-] (it becomes a Nats-Msg-Id)', async () => {
    const before = await watermark();
    for (const hash of ['abc\r\nNats-Expected-Stream: x', 'abc\n', 'a b', 'a.b', 'x'.repeat(129)]) {
      const reply = await ask('submit.begin', {
        runId: 'crlf',
        hash,
        steps: [{ id: 's', tags: ['x'], taskCount: 0 }],
        taskCount: 0,
      });
      expect(reply, JSON.stringify(hash)).toMatchObject({ error: { code: 'validation' } });
      expect(message(reply)).toMatch(/'hash' must match/);
    }
    expect(await watermark()).toEqual(before);
  });

  it('an input nested 100k levels deep, and one nested 65 levels', async () => {
    await beginSubmit('nest', 'h3', 2);
    const before = await watermark();
    for (const levels of [100_000, 65]) {
      const raw = `{"runId":"nest","stepId":"s","tasks":[{"id":"t0"},{"id":"t1","input":${nestedJson(levels)}}]}`;
      const reply = await ask('submit.tasks', raw);
      expect(reply, `${levels} levels`).toMatchObject({ error: { code: 'validation' } });
      expect(message(reply)).toMatch(/'tasks\.1\.input' nests arrays and objects more than 64/);
    }
    expect(await watermark()).toEqual(before);
    // The backend is still there, and takes 64 levels.
    const fine = `{"runId":"nest","stepId":"s","tasks":[{"id":"t0"},{"id":"t1","input":${nestedJson(64)}}]}`;
    expect(await ask('submit.tasks', fine)).toHaveProperty('ok');
  });

  it('an after chain of 12k steps, closed into a cycle or ending at an unknown step', async () => {
    const chain = (last: string) =>
      Array.from({ length: 12_000 }, (_, i) => ({
        id: `s${i}`,
        tags: ['x'],
        after: [i === 11_999 ? last : `s${i + 1}`],
        taskCount: 0,
      }));
    const before = await watermark();
    for (const [last, problem] of [
      ['s0', /cycle in 'after': s0 -> s1 -> .* \(11989 more steps\) -> .* -> s11999 -> s0/],
      ['ghost', /'steps\.11999\.after\.0' names unknown step "ghost"/],
    ] as const) {
      const body = JSON.stringify({ runId: 'chain', hash: 'h4', steps: chain(last), taskCount: 0 });
      expect(body.length).toBeLessThan(1024 * 1024);
      const reply = await ask('submit.begin', body);
      expect(reply, last).toMatchObject({ error: { code: 'validation' } });
      expect(message(reply)).toMatch(problem);
    }
    expect(await watermark()).toEqual(before);
  });

  it('the client SDK refuses the same before sending anything', async () => {
    const client = new SonarClient(nats.nc, { prefix: tb.ctx.names.prefix, maxInputBytes: 1024 });
    const before = await watermark();
    const deep = JSON.parse(nestedJson(100_000)) as unknown;
    const deepErr = await client
      .submit({
        runId: 'sdk',
        steps: [{ id: 's', tags: ['x'], tasks: [{ id: 't', input: deep }] }],
      })
      .catch((e: unknown) => e);
    expect(deepErr).toBeInstanceOf(ValidationError);
    expect((deepErr as ValidationError).issues).toEqual([
      { path: 'steps.0.tasks.0.input', message: expect.stringMatching(/64 levels/) as unknown },
    ]);
    const steps = Array.from({ length: 100_000 }, (_, i) => ({
      id: `s${i}`,
      tags: ['x'],
      after: [i === 99_999 ? 's0' : `s${i + 1}`],
      tasks: [],
    }));
    const chainErr = await client.submit({ runId: 'sdk', steps }).catch((e: unknown) => e);
    expect(chainErr).toBeInstanceOf(ValidationError);
    expect((chainErr as ValidationError).message).toMatch(/cycle in 'after': s0 -> s1 -> /);
    expect(await watermark()).toEqual(before);
  });
});
