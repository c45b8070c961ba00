import { spawn } from 'node:child_process';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { createProjection, applyEvent } from '../../actors/projection.js';
import { replay } from '../../actors/replay.js';
import { replayView } from '../../actors/replay-view.js';
import type { SonarEvent } from '../../actors/events.js';
import { EventStore } from '../../streams/event-store.js';
import { ConcurrencyError, TopologyConflictError } from '../../streams/errors.js';
import { splitLines } from '../../streams/jsonl.js';
import { names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import {
  runSubmitted,
  stepCreated,
  taskCreated,
  taskPublished,
  taskRequeued,
  taskStarted,
  workerJoined,
} from '../helpers/event-builders.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshPrefix, freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();

let ids = 0;
const eventId = () => `e${++ids}-${Math.random().toString(36).slice(2)}`;

/** Appends an event at the subject's current end, as one writer would. */
async function appendNext(store: EventStore, subject: string, event: SonarEvent) {
  const expectedSeq = await store.lastSeqOf(subject);
  return store.append(
    subject,
    { id: eventId(), type: event.type, data: event.data },
    { expectedSeq },
  );
}

describe('ensureTopology', () => {
  it('is idempotent: a second call changes nothing', async () => {
    const jsm = await jetstreamManager(nats.nc);
    const n = names(freshPrefix());
    const first = await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS);
    expect(first.every((c) => c.action === 'created')).toBe(true);
    expect(first.map((c) => c.name)).toContain(n.streams.events);
    const second = await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS);
    expect(second.filter((c) => c.action !== 'unchanged')).toEqual([]);
  });

  it('updates a mutable setting (the pulse TTL) in place', async () => {
    const jsm = await jetstreamManager(nats.nc);
    const n = names(freshPrefix());
    await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS);
    const changes = await ensureTopology(jsm, n, {
      ...DEFAULT_TOPOLOGY_OPTIONS,
      pulseTtlMs: 3_000,
    });
    expect(changes.filter((c) => c.action !== 'unchanged')).toEqual([
      {
        kind: 'kv',
        name: `KV_${n.buckets.workers}`,
        action: 'updated',
        settings: ['duplicate_window', 'max_age'],
      },
    ]);
  });

  it('refuses an existing stream with conflicting settings, naming the setting', async () => {
    const jsm = await jetstreamManager(nats.nc);
    const n = names(freshPrefix());
    await jsm.streams.add({
      name: n.streams.dispatch,
      subjects: [n.subjects.dispatchAll],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
    });
    const err = await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TopologyConflictError);
    expect((err as TopologyConflictError).setting).toBe('retention');
    expect((err as Error).message).toContain(`stream ${n.streams.dispatch}: setting 'retention'`);
  });
});

describe('EventStore', () => {
  it('two writers race to move one task 100 times: each time exactly one wins', async () => {
    const n = await freshTopology(nats.nc);
    const nc2 = await connect({ servers: nats.server.url });
    try {
      const a = new EventStore(nats.nc, n);
      const b = new EventStore(nc2, n);
      const subject = n.subjects.task('r1', 't1');
      let seq = (await appendNext(a, subject, taskCreated())).seq;
      for (let i = 0; i < 100; i++) {
        const event = taskPublished({ attempt: i + 1 });
        const results = await Promise.allSettled([
          a.append(
            subject,
            { id: eventId(), type: event.type, data: event.data },
            { expectedSeq: seq },
          ),
          b.append(
            subject,
            { id: eventId(), type: event.type, data: event.data },
            { expectedSeq: seq },
          ),
        ]);
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
        seq = (won[0] as PromiseFulfilledResult<{ seq: number }>).value.seq;
      }
      expect(await a.readAggregate(subject)).toHaveLength(101);
    } finally {
      await nc2.close();
    }
  });

  it('a retried append with the same id is stored once', async () => {
    const n = await freshTopology(nats.nc);
    const store = new EventStore(nats.nc, n);
    const subject = n.subjects.task('r1', 't1');
    const e = taskCreated();
    const first = await store.append(
      subject,
      { id: 'same-id', type: e.type, data: e.data },
      { expectedSeq: 0 },
    );
    const again = await store.append(subject, { id: 'same-id', type: e.type, data: e.data });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ seq: first.seq, duplicate: true });
    expect(await store.readAggregate(subject)).toHaveLength(1);
  });

  it('reads one aggregate, and nothing for an aggregate without events', async () => {
    const n = await freshTopology(nats.nc);
    const store = new EventStore(nats.nc, n);
    await appendNext(store, n.subjects.task('r1', 't1'), taskCreated());
    await appendNext(store, n.subjects.task('r1', 't2'), taskCreated({ taskId: 't2' }));
    await appendNext(store, n.subjects.task('r1', 't1'), taskPublished());
    const t1 = await store.readAggregate(n.subjects.task('r1', 't1'));
    expect(t1.map((r) => r.type)).toEqual(['TaskCreated', 'TaskPublished']);
    expect(t1[0]!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(await store.readAggregate(n.subjects.task('r1', 'nope'))).toEqual([]);
  });

  it('a payload that cannot be decoded is skipped by replay, not a crash', async () => {
    const n = await freshTopology(nats.nc);
    const store = new EventStore(nats.nc, n);
    await appendNext(store, n.subjects.task('r1', 't1'), taskCreated());
    await jetstream(nats.nc).publish(
      n.subjects.task('r1', 't1'),
      new TextEncoder().encode('not json'),
    );
    const p = createProjection();
    const skipped: string[] = [];
    await store.replay((r) => {
      const out = applyEvent(p, r);
      if (!out.ok) skipped.push(out.reason);
    });
    expect(p.tasks.size).toBe(1);
    expect(skipped).toEqual(['payload is not JSON']);
  });

  it('an export followed by a replay equals the live projection', async () => {
    const n = await freshTopology(nats.nc);
    const store = new EventStore(nats.nc, n);
    const run = 'r1';
    const script: [string, SonarEvent][] = [
      [n.subjects.worker('w1'), workerJoined()],
      [n.subjects.step(run, 's1'), stepCreated({ taskCount: 3 })],
      ...[1, 2, 3].map((i): [string, SonarEvent] => [
        n.subjects.task(run, `t${i}`),
        taskCreated({ taskId: `t${i}` }),
      ]),
      [n.subjects.run(run), runSubmitted({ stepIds: ['s1'], taskCount: 3 })],
      [n.subjects.task(run, 't1'), taskPublished()],
      [n.subjects.task(run, 't1'), taskStarted()],
      [n.subjects.task(run, 't1'), taskRequeued({ reason: 'worker-lost' })],
      [n.subjects.task(run, 't2'), taskPublished()],
      // another run's events, which `export --run r1` leaves out
      [n.subjects.task('r2', 't1'), taskCreated({ runId: 'r2' })],
    ];
    for (const [subject, event] of script) await appendNext(store, subject, event);

    // The live projection: what the backend's loop folds while following the stream.
    const live = createProjection();
    const { records, close } = await store.follow();
    for await (const r of records) {
      applyEvent(live, r);
      if (r.seq === script.length) break;
    }
    await close();

    const exported = await runCli(['export', '--server', nats.server.url, '--prefix', n.prefix]);
    expect(exported.code).toBe(0);
    const lines = splitLines(exported.stdout);
    expect(lines).toHaveLength(script.length);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      seq: 1,
      subject: n.subjects.worker('w1'),
      type: 'WorkerJoined',
    });
    expect(JSON.parse(lines[0]!).id).toEqual(expect.any(String));
    const { projection, skipped } = replay(lines);
    expect(skipped).toEqual([]);
    expect(replayView(projection, [])).toEqual(replayView(live, []));

    const onlyRun = await runCli([
      'export',
      '--run',
      run,
      '--server',
      nats.server.url,
      '--prefix',
      n.prefix,
    ]);
    expect(splitLines(onlyRun.stdout)).toHaveLength(script.length - 2);
  });
});

describe('sonar CLI against a server', () => {
  it('an unreachable server is a one-line error and exit 1', async () => {
    const out = await runCli(['export', '--server', 'nats://127.0.0.1:1']);
    expect(out.code).toBe(1);
    expect(out.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^sonar: cannot reach NATS at nats:\/\/127\.0\.0\.1:1/),
    ]);
  });

  it('bad usage exits 2', async () => {
    expect((await runCli(['tail', '--type', 'Nope', '--server', nats.server.url])).code).toBe(2);
    expect((await runCli(['export', '--run', 'bad id!'])).code).toBe(2);
  });

  it('tail follows live and prints one line per event, JSONL with --json', async () => {
    const n = await freshTopology(nats.nc);
    const store = new EventStore(nats.nc, n);
    await appendNext(store, n.subjects.task('r1', 't1'), taskCreated());
    const child = spawn(
      process.execPath,
      [
        'bin/sonar.js',
        'tail',
        '--since',
        '1h',
        '--run',
        'r1',
        '--json',
        '--server',
        nats.server.url,
        '--prefix',
        n.prefix,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const { eventually } = await import('../helpers/eventually.js');
    await eventually(() => out.includes('TaskCreated'), { timeoutMs: 15_000 });
    await appendNext(store, n.subjects.task('r1', 't1'), taskPublished());
    await appendNext(store, n.subjects.task('r9', 't1'), taskCreated({ runId: 'r9' }));
    await eventually(() => out.includes('TaskPublished'), { timeoutMs: 15_000 });
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    const lines = splitLines(out).map((l) => JSON.parse(l) as { type: string; subject: string });
    expect(lines.map((l) => l.type)).toEqual(['TaskCreated', 'TaskPublished']);
  });
});

function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/sonar.js', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
