import { hostname } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { AckedPublisher } from '../../streams/acked-publisher.js';
import { EventStore } from '../../streams/event-store.js';
import { names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import type { SonarConfig } from '../config.js';
import { hostToken, newId } from '../ids.js';
import { createLogger } from '../log.js';
import type { Logger } from '../log.js';
import { connectNats, drainAndClose } from '../nats.js';
import { createResultsSink } from '../storage/create-results-sink.js';
import type { ConfiguredSink } from '../storage/create-results-sink.js';
import type { OutputStore } from '../storage/output-store.js';
import { ApiService, DispatchPulls, ReaderConsumers } from './api/index.js';
import type { Handlers } from './api/index.js';
import type { BackendContext } from './context.js';
import { checkDurability } from './storage/index.js';
import { DispatchConsumers } from './reconciler/index.js';
import { EventWriter } from './projection/index.js';
import { eventsBoundRefusal, resolveEventsMaxBytes, whenPlaceable } from './storage/index.js';
import { Deadline } from '../grace.js';
import { Liveness } from './reconciler/index.js';
import { ProjectionLoop } from './projection/index.js';
import type { ProjectionStoppedError } from './projection/index.js';
import { Enrollments } from './api/index.js';
import { workerCredentialIssuer } from './api/index.js';
import { Registry } from './reconciler/index.js';
import { ServerContact } from './server-contact.js';
import { loadSnapshot } from './snapshots/index.js';

/** A long-lived part of the backend (reconciler loop, finalizer pool, http server...). */
export interface Component {
  readonly name: string;
  start(): void | Promise<void>;
  /** Stops promptly; the backend bounds each stop with a timeout. */
  stop(): Promise<void>;
}

export interface BackendParts {
  handlers: (ctx: BackendContext) => Handlers;
  components: ((ctx: BackendContext) => Component)[];
  outputs: (nc: NatsConnection, config: SonarConfig) => Promise<OutputStore>;
  /**
   * The results sink the finalizers write and retention purges.
   * @defaultValue the configured one (`createResultsSink`: PostgreSQL with `SONAR_RESULTS_URL`)
   */
  results?: (
    nc: NatsConnection,
    config: SonarConfig,
    opts: { log: Logger; by: string },
  ) => Promise<ConfiguredSink>;
}

export interface BackendOptions {
  config: SonarConfig;
  parts: BackendParts;
  log?: Logger;
  /** An existing connection (tests); otherwise one is made from the config. */
  nc?: NatsConnection;
  nodeId?: string;
  now?: () => number;
  /**
   * The whole stop is bounded by this; a straggler is left, not waited for.
   * @defaultValue `SONAR_STOP_GRACE` (10 s)
   */
  stopTimeoutMs?: number;
  /**
   * Refuse to start when the durability check finds a known problem
   * (storage/durability-check.ts) instead of warning.
   * @defaultValue `SONAR_STRICT_DURABILITY` (`--strict-durability`), else false
   */
  strictDurability?: boolean;
}

/**
 * One backend process: the API service, the projection loop, and the components (reconciler,
 * finalizer pool, ...). Any number run side by side; one of them leads the reconciler.
 */
export class Backend {
  private constructor(
    readonly ctx: BackendContext,
    private readonly api: ApiService,
    private readonly readerConsumers: ReaderConsumers,
    /** Pulls made for workers: secure mode only, where workers may not pull themselves. */
    private readonly dispatchPulls: DispatchPulls | null,
    private readonly components: Component[],
    private readonly ownsConnection: boolean,
    private readonly stopTimeoutMs: number,
  ) {}

  static async start(opts: BackendOptions): Promise<Backend> {
    const { config } = opts;
    const nodeId = opts.nodeId ?? `${hostToken(hostname(), 40)}-${newId().slice(-8)}`;
    const log = (opts.log ?? createLogger({ component: 'backend', level: config.logLevel })).child({
      nodeId,
    });
    const nc = opts.nc ?? (await connectNats(config, { name: `sonar-backend-${nodeId}` }));
    const n = names(config.prefix);
    const jsm = await jetstreamManager(nc);
    const eventsMaxBytes = await resolveEventsMaxBytes(jsm, config.eventsMaxBytes, log);
    const changes = await whenPlaceable(
      () =>
        ensureTopology(jsm, n, {
          replicas: config.replicas,
          pulseTtlMs: config.pulseTtlMs,
          lockTtlMs: config.lockTtlMs,
          finalizeLeaseMs: config.finalizeLeaseMs,
          finalizeMaxDeliver: config.finalizeMaxDeliver,
          eventsMaxBytes,
          sessionTtlMs: config.sessionTtlMs,
          stagingMaxBytes: config.stagingMaxBytes,
          retentionMs: config.retentionMs,
          logsMaxBytes: config.logsMaxBytes,
        }),
      { replicas: config.replicas, log },
    ).catch((err: unknown) => {
      throw eventsBoundRefusal(err, eventsMaxBytes);
    });
    const changed = changes.filter((c) => c.action !== 'unchanged');
    if (changed.length > 0) log.info('topology provisioned', { changes: changed });
    for (const c of changed) if (c.note) log.warn('topology setting adjusted', { ...c });
    // Reads every stream just provisioned, so it may meet the same not-yet-applied stream.
    await whenPlaceable(
      () =>
        checkDurability(nc, jsm, n, {
          strictDurability: opts.strictDurability ?? config.strictDurability,
          log,
        }),
      { replicas: config.replicas, log },
    );
    const publisher = new AckedPublisher(nc);
    const store = new EventStore(nc, n, publisher);
    const loop = new ProjectionLoop(store, log.child({ component: 'projection' }));
    const contact = new ServerContact(nc, jsm, log.child({ component: 'contact' }));
    contact.start();
    const liveness = new Liveness();
    liveness.register('connection', () =>
      nc.isClosed() ? 'the NATS connection closed for good' : null,
    );
    liveness.register('projection', () => loop.stoppedWith?.message ?? null);
    const issuer = await workerCredentialIssuer(
      config,
      log.child({ component: 'credentials' }),
      opts.now ?? Date.now,
    );
    const ctx: BackendContext = {
      config,
      names: n,
      nc,
      js: jetstream(nc),
      jsm,
      store,
      publisher,
      loop,
      writer: new EventWriter(store, loop),
      registry: await Registry.open(nc, n),
      enrollments: await Enrollments.open(nc, n),
      credentials: issuer,
      dispatchConsumers: new DispatchConsumers(jsm, n),
      outputs: await opts.parts.outputs(nc, config),
      results: await (opts.parts.results ?? createResultsSink)(nc, config, {
        log: log.child({ component: 'results' }),
        by: nodeId,
      }),
      log,
      contact,
      liveness,
      nodeId,
      now: opts.now ?? Date.now,
    };
    // A usable snapshot (snapshot.ts) leaves only the events after it to replay. Throws
    // SnapshotLossError when events were purged and the snapshot cannot be used (unless
    // SONAR_ALLOW_SNAPSHOT_LOSS): a replay would silently drop the purged runs.
    await loop.start(
      await loadSnapshot(
        { nc, jsm, names: n, log: log.child({ component: 'snapshot' }) },
        { allowLoss: config.allowSnapshotLoss === true },
      ),
    );
    const api = new ApiService(nc, n, opts.parts.handlers(ctx), log.child({ component: 'api' }), {
      sharedWorkerVerbs: ctx.credentials === null,
    });
    const components = opts.parts.components.map((make) => make(ctx));
    for (const c of components) await c.start();
    api.start();
    const readerConsumers = new ReaderConsumers(
      nc,
      n,
      log.child({ component: 'reader-consumers' }),
    );
    readerConsumers.start();
    const dispatchPulls =
      ctx.credentials === null
        ? null
        : new DispatchPulls(ctx, log.child({ component: 'dispatch-pulls' }));
    dispatchPulls?.start();
    log.info('backend started', { prefix: n.prefix, seq: loop.position });
    return new Backend(
      ctx,
      api,
      readerConsumers,
      dispatchPulls,
      components,
      !opts.nc,
      opts.stopTimeoutMs ?? config.stopGraceMs,
    );
  }

  /** Parts still working when the last stop gave up on them (SONAR_STOP_GRACE). */
  stragglers: string[] = [];

  /**
   * Settles with the error that makes this process useless, when one happens: its projection
   * loop stopped on its own. Nothing it serves can be trusted after that; the process should
   * exit, and its supervisor start it afresh from the snapshot (serve-until-signal.ts).
   */
  get fatal(): Promise<ProjectionStoppedError> {
    return new Promise((resolve) => this.ctx.loop.onFailure(resolve));
  }

  /**
   * Stops taking requests, then stops the components in reverse order, then the projection
   * and the connection, all within one stop grace (SONAR_STOP_GRACE): each part gets the time
   * the ones before it left, and a part still working at the deadline is left running (and
   * named in `stragglers`), so a slow part never holds shutdown past a supervisor's grace
   * period. A finalization job left in hand comes back to another backend after its lease.
   */
  async stop(): Promise<void> {
    const { log } = this.ctx;
    const deadline = new Deadline(this.stopTimeoutMs);
    this.stragglers = [];
    const bounded = async (name: string, work: Promise<unknown>): Promise<void> => {
      if ((await deadline.settle(work)) === 'done') return;
      this.stragglers.push(name);
      log.warn('stop grace ran out: left running', {
        component: name,
        graceMs: this.stopTimeoutMs,
      });
    };
    await bounded('api', this.api.stop());
    await bounded('reader-consumers', this.readerConsumers.stop());
    await bounded('dispatch-pulls', this.dispatchPulls?.stop() ?? Promise.resolve());
    for (const c of [...this.components].reverse()) await bounded(c.name, c.stop());
    await bounded('projection', this.ctx.loop.stop());
    this.ctx.contact.stop();
    await bounded('credentials', this.ctx.credentials?.close() ?? Promise.resolve());
    // After every component: no finalizer or sweep is left to write or purge results.
    await bounded('results', this.ctx.results.close?.() ?? Promise.resolve());
    // Out of time, it closes without flushing: unacked work comes back after its lease.
    if (this.ownsConnection) await drainAndClose(this.ctx.nc, deadline);
    log.info('backend stopped', { stragglers: this.stragglers });
  }
}
