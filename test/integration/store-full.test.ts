import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../actors/errors.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import type { TopologyOptions } from '../../streams/topology.js';
import { eventsStoreRoom } from '../../src/backend/storage/events-store-room.js';
import { RECONCILER_LOCK } from '../../src/backend/reconciler/leader-lock.js';
import { SMALLEST_RUN_BYTES } from '../../src/backend/storage/store-room.js';
import { tasksByState } from '../../src/backend/storage/task-counts.js';
import { SonarClient } from '../../src/client/client.js';
import { requestSchemas } from '../../src/protocol.js';
import type { RunFile } from '../../src/protocol.js';
import { errorReply, validationErrorOf } from '../../src/backend/api/api-service.js';
import { isApiError } from '../../src/worker/api-client.js';
import { backendPerTest } from '../helpers/backend-per-test.js';
import { eventually } from '../helpers/eventually.js';
import { runSonar } from '../helpers/sonar-process.js';
import { startNatsServer } from '../helpers/nats-server.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { tempDirPerFile } from '../helpers/temp-dir-per-file.js';
import { freshTopology } from '../helpers/topology.js';
import { eventsOf, spawnShellWorker, startTestBackend } from '../helpers/worker-fixtures.js';
import type { WorkerProcess } from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

/**
 * A full event log stops new work, not the fleet. The server's whole store is small
 * (`max_file_store`), as on the 48 MB filesystem where registry and lock writes failed with
 * the log; the events stream has its own bound under it (SONAR_EVENTS_MAX_BYTES), and real
 * worker processes run tasks while submits fill the log.
 */
const MiB = 1024 * 1024;
const EVENTS_MAX_BYTES = 3 * MiB;
const INPUT = 'x'.repeat(100_000);

const dir = tempDirPerFile('sonar-store-full');
/** The file's server: its whole store is 24 MB. */
const nats = serverPerFile({
  async start() {
    const config = join(dir(), 'server.conf');
    await writeFile(config, `jetstream { store_dir: "${dir()}/js", max_file_store: 24MB }\n`);
    return startNatsServer({ config, storeDir: join(dir(), 'js') });
  },
});
const backend = backendPerTest(nats);
/** The running test's backend (backendPerTest stops it, and kills its workers, after the test). */
let tb: TestBackend | undefined;

/** `count` tasks on `tag`, each with `input`. */
function runOf(runId: string, tag: string, count: number, input: unknown = INPUT): RunFile {
  return {
    runId,
    steps: [
      {
        id: 's',
        tags: [tag],
        tasks: Array.from({ length: count }, (_, i) => ({ id: `t${i}`, input })),
      },
    ],
  };
}

/** Runs `sonar <args>` against the test backend's topology. */
async function sonar(
  ...args: string[]
): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runSonar('sonar', args, { ...tb!.env, NO_COLOR: '1' });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

async function get(path: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${tb!.url}${path}`);
  return { status: res.status, text: await res.text() };
}

/** Nothing of the run is in the log: no run, step or task event. */
async function writtenOf(runId: string): Promise<number> {
  const { subjects } = tb!.ctx.names;
  const all = await Promise.all([
    eventsOf(tb!.ctx, subjects.run(runId)),
    eventsOf(tb!.ctx, subjects.step(runId, '*')),
    eventsOf(tb!.ctx, subjects.task(runId, '*')),
  ]);
  return all.reduce((n, records) => n + records.length, 0);
}

const topologyOf = (t: TestBackend, eventsMaxBytes: number): TopologyOptions => ({
  replicas: t.config.replicas,
  pulseTtlMs: t.config.pulseTtlMs,
  lockTtlMs: t.config.lockTtlMs,
  finalizeLeaseMs: t.config.finalizeLeaseMs,
  finalizeMaxDeliver: t.config.finalizeMaxDeliver,
  eventsMaxBytes,
});

describe('a full event log', () => {
  it('refuses new work whole and clearly while running tasks finish; the fleet and the leader stay; new runs go through once there is room', async () => {
    // Its HTTP server serves only the probes and /metrics (SONAR_DASHBOARD off).
    tb = await backend.start(
      {
        SONAR_EVENTS_MAX_BYTES: String(EVENTS_MAX_BYTES),
        SONAR_TICK: '200ms',
        SONAR_HTTP_PORT: '0',
        SONAR_DASHBOARD: 'off',
      },
      { reconciler: true },
    );
    const { ctx } = tb;
    const { nc } = nats;
    const p = () => ctx.loop.projection;
    const workers: WorkerProcess[] = [];
    for (let i = 0; i < 2; i++) {
      workers.push(spawnShellWorker(tb.env, 2, 'cat >/dev/null; sleep 1; echo ok'));
    }
    await eventually(() => p().workers.size === 2, { timeoutMs: 20_000, message: 'joined' });
    const client = new SonarClient(nc, { prefix: tb.config.prefix });

    // Submit 600 KB runs until the log has no room for one: tasks are running meanwhile.
    const admitted: string[] = [];
    let refusal: unknown;
    let inFlightAtRefusal = 0;
    for (let i = 0; i < 10 && refusal === undefined; i++) {
      try {
        await client.submit(runOf(`r${i}`, 'linux', 6));
        admitted.push(`r${i}`);
        if (i === 0) {
          await eventually(() => p().tasksByState.Running.size > 0, {
            timeoutMs: 20_000,
            message: 'tasks running',
          });
        }
      } catch (err: unknown) {
        refusal = err;
        inFlightAtRefusal = p().tasksByState.Published.size + p().tasksByState.Running.size;
      }
    }
    expect(admitted.length).toBeGreaterThanOrEqual(2);
    expect(isApiError(refusal, ErrorCode.StoreFull)).toBe(true);
    expect((refusal as Error).message).toMatch(
      /^the event log is full: .* used \(SONAR_EVENTS_MAX_BYTES\), .* kept for the \d+ open tasks; this submit needs about/,
    );
    expect(inFlightAtRefusal).toBeGreaterThan(0);
    const refused = `r${admitted.length}`;
    expect(await writtenOf(refused)).toBe(0);

    // The CLI says the same in one line and exits 1; still nothing written.
    const file = join(dir(), 'cli.json');
    await writeFile(file, JSON.stringify(runOf('cli', 'linux', 6)));
    const cli = await sonar('submit', file);
    expect(cli.code).toBe(1);
    expect(cli.err).toMatch(/^sonar: the event log is full: /);
    expect(await writtenOf('cli')).toBe(0);

    // Every admitted run finishes: started, results accepted, finalized.
    await eventually(() => admitted.every((r) => p().runs.get(r)?.snapshot.value === 'Succeeded'), {
      timeoutMs: 90_000,
      message: 'admitted runs succeeded',
    });
    expect(tasksByState(p()).Succeeded).toBe(admitted.length * 6);

    // Fill the log exactly with a run nobody serves: its tasks stay open, so the room stays gone.
    const room = await eventsStoreRoom(ctx).room();
    const free = room.freeBytes!;
    const n = Math.ceil(free / 200_000);
    const fillInput = 'y'.repeat(Math.floor((free - n * (SMALLEST_RUN_BYTES + 40) - 100) / n));
    await client.submit(runOf('fill', 'nobody', n, fillInput));
    const full = await eventsStoreRoom(ctx).room();
    expect(full.full).toBe(true);
    const tiny = await client.submit(runOf('tiny', 'linux', 1, 1)).catch((e: unknown) => e);
    expect(isApiError(tiny, ErrorCode.StoreFull)).toBe(true);
    expect(await writtenOf('tiny')).toBe(0);

    // Status, /readyz and /metrics say so; the backend stays ready: it still serves workers.
    const status = await sonar('status', '--json');
    expect(status.code).toBe(0);
    const view = JSON.parse(status.out) as {
      eventsStore: { full: boolean; maxBytes: number };
      leader: { nodeId: string };
      workers: { state: string }[];
    };
    expect(view.eventsStore).toMatchObject({ full: true, maxBytes: EVENTS_MAX_BYTES });
    expect(view.leader.nodeId).toBe(ctx.nodeId);
    expect(view.workers.map((w) => w.state)).toEqual(['active', 'active']);
    expect((await sonar('status')).out).toMatch(
      /store {5}events .* of 3\.0 MiB, FULL: new work is refused/,
    );
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toMatchObject({ ready: true, storeFull: true });
    const metrics = (await get('/metrics')).text;
    expect(metrics).toMatch(/^sonar_events_store_full 1$/m);
    expect(metrics).toMatch(new RegExp(`^sonar_events_store_max_bytes ${EVENTS_MAX_BYTES}$`, 'm'));
    expect(metrics).toMatch(/^sonar_events_store_bytes \d+$/m);

    // The control plane never lost a write: no worker Lost, both processes alive, one election.
    expect([...p().workers.values()].map((w) => w.snapshot.value)).toEqual(['Active', 'Active']);
    for (const w of workers) expect(w.child.exitCode).toBeNull();
    const lock = await (await new Kvm(nc).open(ctx.names.buckets.locks)).get(RECONCILER_LOCK);
    expect(lock?.string()).toBe(ctx.nodeId);
    const elections = await eventsOf(ctx, ctx.names.subjects.system('reconciler'));
    expect(elections.filter((e) => e.type === 'ReconcilerElected')).toHaveLength(1);
    const account = await (await jetstreamManager(nc)).getAccountInfo();
    expect(account.storage).toBeLessThan(24_000_000 - 4 * MiB);

    // Room again (a larger bound, as a restart with a larger SONAR_EVENTS_MAX_BYTES sets it):
    // new runs go through.
    await ensureTopology(await jetstreamManager(nc), ctx.names, topologyOf(tb, 6 * MiB));
    expect((await eventsStoreRoom(ctx).room()).full).toBe(false);
    expect((await get('/metrics')).text).toMatch(/^sonar_events_store_full 0$/m);
    await client.submit(runOf('after', 'linux', 4));
    await eventually(() => p().runs.get('after')?.snapshot.value === 'Succeeded', {
      timeoutMs: 30_000,
      message: 'the run after the bound was raised succeeded',
    });
  }, 180_000);
});

describe('the events stream bound', () => {
  it('is never lowered below what the stream holds: nats-server would delete the oldest events', async () => {
    const { nc } = nats;
    const n = await freshTopology(nc);
    const jsm = await jetstreamManager(nc);
    const js = jsm.jetstream();
    for (let i = 0; i < 8; i++) await js.publish(n.subjects.system(`fill${i}`), INPUT);
    const before = await jsm.streams.info(n.streams.events);
    const changes = await ensureTopology(jsm, n, {
      ...DEFAULT_TOPOLOGY_OPTIONS,
      eventsMaxBytes: 256 * 1024,
    });
    const events = changes.find((c) => c.name === n.streams.events)!;
    expect(events).toMatchObject({ action: 'updated', settings: ['max_bytes'] });
    expect(events.note).toMatch(/below the \d+ bytes stored/);
    const after = await jsm.streams.info(n.streams.events);
    expect(after.state.messages).toBe(before.state.messages);
    expect(after.state.first_seq).toBe(before.state.first_seq);
    expect(after.config.max_bytes).toBe(before.state.bytes + Math.ceil((256 * 1024) / 10));
    expect(after.config.discard).toBe('new');
    // Raising it later is an ordinary update; the same options again change nothing.
    const opts = { ...DEFAULT_TOPOLOGY_OPTIONS, eventsMaxBytes: 4 * MiB };
    await ensureTopology(jsm, n, opts);
    expect((await jsm.streams.info(n.streams.events)).config.max_bytes).toBe(4 * MiB);
    const again = await ensureTopology(jsm, n, opts);
    expect(again.every((c) => c.action === 'unchanged')).toBe(true);
  });
});

describe('a client against a backend older than submit.begin `bytes`', () => {
  it('asks again without the field when the backend refuses it as unknown', async () => {
    const { nc } = nats;
    const n = await freshTopology(nc);
    // The older backend's schema: `submit.begin` without `bytes`, strict as every request is.
    const older = requestSchemas['submit.begin'].omit({ bytes: true });
    const begins: Record<string, unknown>[] = [];
    const reply = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
    const subs = [
      nc.subscribe(n.subjects.api('submit.begin'), {
        callback: (_err, msg) => {
          const req = msg.json<Record<string, unknown>>();
          begins.push(req);
          const parsed = older.safeParse(req);
          msg.respond(
            reply(
              parsed.success
                ? { ok: { runId: req['runId'] } }
                : errorReply(validationErrorOf('submit.begin', parsed.error)),
            ),
          );
        },
      }),
      nc.subscribe(n.subjects.api('submit.tasks'), {
        callback: (_err, msg) => {
          msg.respond(reply({ ok: {} }));
        },
      }),
      nc.subscribe(n.subjects.api('submit.commit'), {
        callback: (_err, msg) => {
          msg.respond(reply({ ok: { runId: 'old', taskCount: 2 } }));
        },
      }),
    ];
    try {
      const client = new SonarClient(nc, { prefix: n.prefix });
      await expect(client.submit(runOf('old', 'linux', 2, 1))).resolves.toEqual({
        runId: 'old',
        taskCount: 2,
      });
      expect(begins.map((b) => 'bytes' in b)).toEqual([true, false]);
    } finally {
      for (const s of subs) s.unsubscribe();
    }
  });
});

describe('SONAR_EVENTS_MAX_BYTES', () => {
  it('auto: half the account JetStream storage limit when the account has one', async () => {
    const accountDir = await mkdtemp(join(tmpdir(), 'sonar-store-account-'));
    const config = join(accountDir, 'server.conf');
    await writeFile(
      config,
      [
        `jetstream { store_dir: "${accountDir}/js", max_file_store: 64MB }`,
        'accounts { APP: { jetstream: { max_file: 16MB, max_mem: 1MB }, users: [{ user: app, password: app }] } }',
        '',
      ].join('\n'),
    );
    // A server of its own: the account limit under test is in the server's config.
    const own = await startNatsServer({ config, storeDir: join(accountDir, 'js') });
    const appNc = await connect({ servers: own.url, user: 'app', pass: 'app' });
    try {
      const limit = (await (await jetstreamManager(appNc)).getAccountInfo()).limits.max_storage;
      expect(limit).toBeGreaterThan(0);
      const t = await startTestBackend(own.url, appNc);
      try {
        const info = await t.ctx.jsm.streams.info(t.ctx.names.streams.events);
        expect(info.config.max_bytes).toBe(Math.floor(limit / 2));
        expect(info.config.discard).toBe('new');
      } finally {
        await t.stop();
      }
    } finally {
      await appNc.close();
      await own.stop();
      await rm(accountDir, { recursive: true, force: true });
    }
  });

  it('a bound the server cannot reserve stops the backend with the setting named', async () => {
    const err = await backend.start({ SONAR_EVENTS_MAX_BYTES: '100MiB' }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(
      /^SONAR_EVENTS_MAX_BYTES \(100 MiB\) is more than the JetStream store can reserve/,
    );
  });
});
