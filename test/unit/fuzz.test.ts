/**
 * Bad-input fuzzing: random and mutated inputs thrown at every door a stranger can
 * knock on. Each must end in a clean error (ValidationError, an `{"error"}` reply) or a skip;
 * none may crash. 10,800 cases in all.
 *
 * - run files -> validateRunFile (what `sonar submit` and the backend run);
 * - API payloads -> ApiService (JSON parse, the verb's zod schema, the error reply), with
 *   handlers that record whether they were reached;
 * - event log lines -> replay (what `sonar replay` and the projection fold run);
 * - registry entries -> the live.json schema, then plan() over a replayed projection.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { isSonarError, ValidationError } from '../../actors/errors.js';
import { DEFAULT_PLAN_CONFIG } from '../../actors/reconciler/config.js';
import { plan } from '../../actors/reconciler/plan.js';
import { replay } from '../../actors/replay.js';
import { names } from '../../streams/names.js';
import { ApiService } from '../../src/backend/api/api-service.js';
import type { Handlers } from '../../src/backend/api/api-service.js';
import { validateRunFile } from '../../src/run-file.js';
import { silentLogger } from '../../src/log.js';
import { WORKER_VERBS, registryEntrySchema, requestSchemas } from '../../src/protocol.js';
import type { Verb } from '../../src/protocol.js';
import { VALID_REQUESTS } from '../helpers/valid-requests.js';

const scenario = (name: string): string[] =>
  readFileSync(new URL(`../replay/scenarios/${name}.jsonl`, import.meta.url), 'utf8').split('\n');

// ---------- mutation: a valid value with one thing wrong ----------

/** Values of every JSON kind, and a few that JSON never gives. */
const weird = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    '',
    'a.b',
    'x'.repeat(65),
    '../etc',
    '*',
    '>',
    ' ',
    '\u0000',
    -1,
    0,
    1.5,
    2 ** 53,
    Number.NaN,
    Infinity,
    null,
    [],
    {},
    { __proto__: { polluted: true } },
  ),
);

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Replaces, drops or adds one field somewhere inside `value` (chosen by `pick`). */
function mutate(value: unknown, path: number[], replacement: unknown, mode: number): unknown {
  if (typeof value !== 'object' || value === null) return replacement;
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value);
  if (entries.length === 0 || path.length === 0) {
    return Array.isArray(value) ? [...value, replacement] : { ...value, extra: replacement };
  }
  const [key, child] = entries[path[0]! % entries.length]!;
  const copy: Record<string | number, unknown> | unknown[] = Array.isArray(value)
    ? [...value]
    : { ...value };
  const last = path.length === 1;
  if (last && mode === 0 && !Array.isArray(copy)) delete copy[key];
  else if (last && mode === 1 && Array.isArray(copy)) copy.splice(Number(key), 1);
  else
    (copy as Record<string | number, unknown>)[key] = last
      ? replacement
      : mutate(child, path.slice(1), replacement, mode);
  return copy;
}

const mutationOf = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc
    .tuple(valid, fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), weird, fc.nat(3))
    .map(([v, path, replacement, mode]) => mutate(v, path, replacement, mode));

// ---------- run files ----------

const id = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);

const validRunFile = fc
  .record({
    runId: id,
    steps: fc.uniqueArray(
      fc.record({
        id,
        tags: fc.array(id, { minLength: 1, maxLength: 3 }),
        output: fc.constantFrom('json', 'bytes'),
        tasks: fc.uniqueArray(
          fc.record(
            {
              id,
              command: fc.array(fc.string(), { minLength: 1, maxLength: 3 }),
              input: fc.jsonValue({ maxDepth: 2 }),
              maxAttempts: fc.integer({ min: 1, max: 100 }),
            },
            { requiredKeys: ['id'] },
          ),
          { selector: (t) => t.id, maxLength: 4 },
        ),
      }),
      { selector: (s) => s.id, minLength: 1, maxLength: 3 },
    ),
  })
  // `after` may only name earlier steps: no cycle in a valid file.
  .map((f) => ({
    ...f,
    steps: f.steps.map((s, i) => ({ ...s, after: i > 0 ? [f.steps[i - 1]!.id] : [] })),
  }));

/** validateRunFile either accepts (and then the file is whole) or refuses with a list. */
function checkRunFile(raw: unknown): boolean {
  try {
    const parsed = validateRunFile(raw, { maxInputBytes: 4 * 1024 });
    expect(parsed.steps.length).toBeGreaterThan(0);
    return true;
  } catch (err: unknown) {
    expect(err).toBeInstanceOf(ValidationError);
    const v = err as ValidationError;
    expect(v.issues.length).toBeGreaterThan(0);
    for (const i of v.issues) expect(typeof i.path === 'string' && i.message !== '').toBe(true);
    return false;
  }
}

// ---------- the API service, without a network ----------

/** An ApiService on a stand-in connection: `send` hands it one request, returns the reply. */
function apiUnderTest() {
  let deliver: ((err: Error | null, msg: Msg) => void) | null = null;
  const nc = {
    subscribe: (_subject: string, opts: { callback: typeof deliver }) => {
      deliver = opts.callback;
      return { unsubscribe: () => {} };
    },
  } as unknown as NatsConnection;
  const reached: string[] = [];
  const handlers: Handlers = Object.fromEntries(
    Object.keys(requestSchemas).map((verb) => [
      verb,
      (req: unknown) => {
        // What reaches a handler must be what its schema produces.
        const again = requestSchemas[verb as Verb].safeParse(req);
        if (!again.success) throw new Error(`${verb} handler got a payload its schema refuses`);
        reached.push(verb);
        return Promise.resolve({});
      },
    ]),
  );
  const n = names('sonar');
  const service = new ApiService(nc, n, handlers, silentLogger);
  service.start();
  // An honest worker asks its verbs on its own subject, named after the payload's worker.
  const subjectOf = (verb: string, data: Uint8Array): string => {
    let workerId: unknown;
    try {
      workerId = (JSON.parse(new TextDecoder().decode(data)) as { workerId?: unknown }).workerId;
    } catch {
      workerId = undefined;
    }
    return WORKER_VERBS.has(verb as Verb) &&
      typeof workerId === 'string' &&
      /^[A-Za-z0-9_-]{1,64}$/.test(workerId)
      ? n.subjects.workerApi(workerId, verb)
      : n.subjects.api(verb);
  };
  const send = (verb: string, data: Uint8Array) =>
    new Promise<{ ok?: unknown; error?: { code: string; message: string; details: unknown } }>(
      (resolve) => {
        deliver!(null, {
          subject: subjectOf(verb, data),
          data,
          reply: '_INBOX.x',
          respond: (bytes: Uint8Array) => {
            resolve(JSON.parse(new TextDecoder().decode(bytes)) as never);
            return true;
          },
        } as unknown as Msg);
      },
    );
  return { send, reached };
}

/**
 * A plausible payload per verb, to be mutated: the valid minimum, with the optional fields
 * of a few verbs filled in so that mutations reach them too.
 */
const VALID: Record<Verb, unknown> = {
  ...VALID_REQUESTS,
  drain: { workerId: 'w1', reason: 'shutdown', deadline: '2026-01-01T00:00:00.000Z' },
  exited: { workerId: 'w1', code: 137, signal: 'SIGKILL' },
  'submit.tasks': { runId: 'r1', stepId: 's', tasks: [{ id: 't1', input: {} }] },
  cancel: { runId: 'r1', taskId: 't1', reason: 'x' },
};
const verbs = Object.keys(VALID) as Verb[];
const encoder = new TextEncoder();

// ---------- replay ----------

const happy = scenario('happy-path-two-steps').filter((l) => l.trim() !== '');

/** A real event line with one field changed, or random text, or random JSON. */
const eventLine = fc.oneof(
  fc.string(),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  mutationOf(fc.constantFrom(...happy.map((l) => JSON.parse(l) as Json))).map((v) =>
    JSON.stringify(v),
  ),
  fc.constantFrom(...happy),
  // cut short, as a crash mid-write leaves it
  fc.tuple(fc.constantFrom(...happy), fc.nat()).map(([l, k]) => l.slice(0, k % l.length)),
);

// ---------- plan ----------

/** A mid-run projection: the first 1,200 lines of a chaos run (tasks in every state). */
const midRun = scenario('chaos-workers-killed').slice(0, 1_200);

const midRunStart = Date.parse((JSON.parse(midRun[0]!) as { time: string }).time);

const registryEntry = fc.record({
  workerId: fc.oneof(fc.constantFrom('w1', 'w2', 'w3', 'w9'), id),
  host: fc.string(),
  tags: fc.array(fc.oneof(fc.constant('chaos'), id), { maxLength: 3 }),
  slots: fc.oneof(
    { weight: 9, arbitrary: fc.integer({ min: 1, max: 64 }) },
    { weight: 1, arbitrary: fc.integer() },
  ),
  active: fc.boolean(),
  // Mostly pulses around the plan's clock (some fresh, some stale), some unreadable.
  pulseAt: fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .integer({ min: -60_000, max: 60_000 })
        .map((ms) => new Date(midRunStart + 30_000 + ms).toISOString()),
    },
    { weight: 1, arbitrary: fc.string() },
  ),
  running: fc.array(fc.string(), { maxLength: 3 }),
});

const liveJson = fc.oneof(
  { weight: 4, arbitrary: fc.array(registryEntry, { maxLength: 6 }) },
  { weight: 1, arbitrary: mutationOf(fc.array(registryEntry, { minLength: 1, maxLength: 4 })) },
  { weight: 1, arbitrary: fc.jsonValue() },
);

describe('fuzz: bad input gets a clean error or a skip, never a crash', () => {
  it('run files (random JSON and mutated valid files): 3,000 cases', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutationOf(validRunFile), validRunFile), (raw) => {
        if (checkRunFile(raw)) accepted++;
      }),
      { numRuns: 3_000 },
    );
    expect(accepted).toBeGreaterThan(300);
    expect(accepted).toBeLessThan(2_700);
  });

  it('API payloads through the ApiService: 3,000 cases, handlers reached only when valid', async () => {
    const api = apiUnderTest();
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...verbs).chain((verb) =>
          fc.tuple(
            fc.constant(verb),
            fc.oneof(
              fc.uint8Array({ maxLength: 64 }),
              fc.jsonValue().map((v) => encoder.encode(JSON.stringify(v))),
              mutationOf(fc.constant(VALID[verb] as Json)).map((v) =>
                encoder.encode(JSON.stringify(v)),
              ),
              fc.constant(encoder.encode(JSON.stringify(VALID[verb]))),
            ),
          ),
        ),
        async ([verb, data]) => {
          const before = api.reached.length;
          const reply = await api.send(verb, data);
          const valid = (() => {
            try {
              return requestSchemas[verb].safeParse(JSON.parse(new TextDecoder().decode(data)))
                .success;
            } catch {
              return false;
            }
          })();
          if (valid && verb === 'batch') {
            // A batch is answered request by request: each reaches its handler only if valid.
            accepted++;
            const replies = (reply.ok as { replies: { ok?: unknown }[] }).replies;
            const sent = (JSON.parse(new TextDecoder().decode(data)) as { requests: unknown[] })
              .requests;
            expect(replies).toHaveLength(sent.length);
            expect(api.reached.length).toBe(before + replies.filter((r) => r.ok).length);
          } else if (valid) {
            accepted++;
            expect(reply).toEqual({ ok: {} });
            expect(api.reached.length).toBe(before + 1);
          } else {
            expect(reply.error?.code).toBe('validation');
            expect(reply.error?.message).toMatch(new RegExp(`^${verb.replace('.', '\\.')}: `));
            expect(api.reached.length).toBe(before);
          }
        },
      ),
      { numRuns: 3_000 },
    );
    // Both sides were exercised: a fuzz that refuses everything proves little.
    expect(accepted).toBeGreaterThan(300);
    expect(accepted).toBeLessThan(2_700);
    // The valid payloads themselves do reach their handlers.
    for (const v of verbs) {
      const answer = v === 'batch' ? { replies: [{ ok: {} }] } : {};
      expect(await api.send(v, encoder.encode(JSON.stringify(VALID[v])))).toEqual({ ok: answer });
    }
    const unknown = await api.send('nope', encoder.encode('{}'));
    expect(unknown.error?.code).toBe('not_found');
  });

  it('event log lines through replay: 2,500 logs of up to 30 lines', () => {
    let applied = 0;
    let refused = 0;
    fc.assert(
      fc.property(fc.array(eventLine, { maxLength: 30 }), (lines) => {
        const { projection, skipped } = replay(lines);
        const nonEmpty = lines.filter((l) => l.trim() !== '').length;
        expect(skipped.length).toBeLessThanOrEqual(nonEmpty);
        for (const s of skipped) {
          expect(Number.isSafeInteger(s.seq) && s.seq > 0).toBe(true);
          expect(s.reason).not.toBe('');
        }
        expect(projection.tasks.size).toBeLessThanOrEqual(nonEmpty);
        applied += nonEmpty - skipped.length;
        refused += skipped.length;
      }),
      { numRuns: 2_500 },
    );
    expect(applied).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(1_000);
  });

  it('registry entries through the live.json schema and plan(): 2,300 cases', () => {
    const { projection, skipped } = replay(midRun);
    expect(skipped).toEqual([]);
    let planned = 0;
    let published = 0;
    fc.assert(
      fc.property(liveJson, fc.integer({ min: -20_000, max: 3_600_000 }), (raw, offset) => {
        const parsed = registryEntrySchema.array().safeParse(raw);
        if (!parsed.success) {
          expect(parsed.error.issues.length).toBeGreaterThan(0);
          return;
        }
        const d = plan(projection, parsed.data, midRunStart + 30_000 + offset, DEFAULT_PLAN_CONFIG);
        planned++;
        published += d.publish.length;
        // Only eligible tags get work, and no capacity figure is negative.
        const tags = new Set(parsed.data.filter((e) => e.active).flatMap((e) => e.tags));
        for (const p of d.publish) expect(tags.has(p.tag)).toBe(true);
        expect(d.capacity.global).toBeGreaterThanOrEqual(0);
        for (const c of Object.values(d.capacity.tags)) expect(c).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 2_300 },
    );
    expect(planned).toBeGreaterThan(500);
    expect(published).toBeGreaterThan(0);
  });
});

describe('fuzz: a refused payload is a SonarError, never a bare throw', () => {
  it('validateRunFile on non-objects', () => {
    for (const raw of [undefined, null, 1, 'x', [], () => 1, Symbol('s')]) {
      let err: unknown;
      try {
        validateRunFile(raw, { maxInputBytes: 1024 });
      } catch (e: unknown) {
        err = e;
      }
      expect(isSonarError(err, 'validation')).toBe(true);
    }
  });
});
