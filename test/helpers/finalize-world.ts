/**
 * What every finalizer integration file starts: one nats-server for the file and, per test, a
 * scene on it: a fresh topology, a writer of the test's own that puts tasks straight into
 * Finalizing (no worker runtime), and the pool backends the test starts on that topology.
 * A scene is stopped after the test that opened it (after the file, when opened in a
 * `beforeAll`): its backends first, then its writer, so no test leaves a pool running.
 */
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeEach } from 'vitest';
import type { Names } from '../../streams/names.js';
import type { FinalizeJob } from '../../streams/queues.js';
import type { TopologyOptions } from '../../streams/topology.js';
import { KvResultsSink } from '../../src/storage/results-sink.js';
import { startPoolBackend } from './finalize-backend.js';
import type { PoolBackendOptions } from './finalize-backend.js';
import {
  ObjOutputStore,
  countIn,
  enqueueAll,
  openWriter,
  seedFinalizing,
  stateOf,
} from './finalize-fixtures.js';
import type { SeedOptions, TestWriter } from './finalize-fixtures.js';
import { serverPerFile } from './server-per-file.js';
import type { ServerPerFile } from './server-per-file.js';
import type { TestBackend } from './test-backend.js';
import { freshTopology } from './topology.js';

/** The topology's finalization lease: that of FINALIZE_TEST_ENV, which pool backends get. */
export const FINALIZE_TEST_LEASE_MS = 2_000;

export interface FinalizeScene {
  readonly n: Names;
  /** The test's own writer: its event store, projection loop and EventWriter. */
  readonly w: TestWriter;
  /** The production results sink on this topology: to wrap, or to read records back. */
  readonly kv: KvResultsSink;
  /** The topology's object store of outputs, for stored outputs to seed and read back. */
  readonly objects: ObjOutputStore;
  /** Puts tasks into Finalizing (see seedFinalizing): their jobs, not yet enqueued. */
  seed(o: SeedOptions): Promise<FinalizeJob[]>;
  /** Enqueues jobs as the `result` handlers would. */
  enqueue(jobs: FinalizeJob[], round?: number): Promise<void>;
  /** {@link FinalizeScene.seed}, then {@link FinalizeScene.enqueue} of every job. */
  seedAndEnqueue(o: SeedOptions): Promise<FinalizeJob[]>;
  /** A task's state in the writer's projection. */
  stateOf(runId: string, taskId: string): string | undefined;
  /** How many tasks of `runId` are in `state`. */
  countIn(runId: string, state: string): number;
  /** A pool backend on this topology (see startPoolBackend), on `nc` if given. */
  startPool(opts?: PoolBackendOptions, nc?: NatsConnection): Promise<TestBackend>;
}

export interface FinalizeWorld {
  /** The file's server and its connection (read inside tests only). */
  readonly nats: ServerPerFile;
  /** A scene on a fresh topology: the test lease unless `topology` says otherwise. */
  scene(topology?: Partial<TopologyOptions>): Promise<FinalizeScene>;
  /** Another connection to the server, closed after the file: a second backend's own. */
  connect(): Promise<NatsConnection>;
}

interface OpenScene {
  scene: FinalizeScene;
  stop(): Promise<void>;
}

async function openScene(
  nats: ServerPerFile,
  topology: Partial<TopologyOptions>,
): Promise<OpenScene> {
  const { nc } = nats;
  const n = await freshTopology(nc, topology);
  const w = await openWriter(nc, n);
  const kv = await KvResultsSink.open(nc, n);
  const objects = await ObjOutputStore.open(nc, n);
  const backends: TestBackend[] = [];
  const seed = (o: SeedOptions) => seedFinalizing(w.writer, n, o);
  const enqueue = (jobs: FinalizeJob[], round?: number) => enqueueAll(nc, n, jobs, round);
  const scene: FinalizeScene = {
    n,
    w,
    kv,
    objects,
    seed,
    enqueue,
    async seedAndEnqueue(o) {
      const jobs = await seed(o);
      await enqueue(jobs);
      return jobs;
    },
    stateOf: (runId, taskId) => stateOf(w.loop, runId, taskId),
    countIn: (runId, state) => countIn(w.loop, runId, state),
    async startPool(opts = {}, on = nc) {
      const b = await startPoolBackend(on, nats.server.url, n, opts);
      // A test may stop a backend itself (a bounded stop, a crash): stopped once, then again
      // a no-op when the scene ends.
      const stop = b.stop.bind(b);
      let stopped: Promise<void> | undefined;
      b.stop = () => (stopped ??= stop());
      backends.push(b);
      return b;
    },
  };
  return {
    scene,
    async stop() {
      for (const b of backends.reverse()) await b.stop();
      await w.stop();
    },
  };
}

export function finalizeWorldPerFile(): FinalizeWorld {
  const nats = serverPerFile();
  const conns: NatsConnection[] = [];
  const ofTests: OpenScene[] = [];
  const ofFile: OpenScene[] = [];
  let inTest = false;
  const stopAll = async (open: OpenScene[]) => {
    for (const s of open.splice(0).reverse()) await s.stop();
  };
  beforeEach(() => {
    inTest = true;
  });
  afterEach(async () => {
    inTest = false;
    await stopAll(ofTests);
  });
  afterAll(async () => {
    await stopAll(ofFile);
    for (const c of conns.splice(0)) if (!c.isClosed()) await c.close();
  });
  return {
    nats,
    async scene(topology = { finalizeLeaseMs: FINALIZE_TEST_LEASE_MS }) {
      const open = await openScene(nats, topology);
      (inTest ? ofTests : ofFile).push(open);
      return open.scene;
    },
    async connect() {
      const c = await connect({ servers: nats.server.url });
      conns.push(c);
      return c;
    },
  };
}
