import type { JetStreamManager } from '@nats-io/jetstream';
import { ConnectionWatch } from '../connection-watch.js';
import type { ConnectionStats } from '../connection-watch.js';
import { settleWithin } from '../grace.js';
import type { Logger } from '../log.js';
import type { NatsConnection } from '@nats-io/transport-node';

/** How often JetStream is asked whether it answers. */
const PROBE_EVERY_MS = 1_000;
/** A probe not answered within this is a JetStream that does not answer. */
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Whether this backend is in contact with the server: connected, and JetStream answering
 * (a cluster without quorum keeps the connection up while every JetStream request times
 * out). Contact that held without a break for a while is *steady*: the reconciler and the
 * sweep judge a worker by its missing registry key only after a pulse TTL of steady contact,
 * since during an outage no worker could pulse, and their keys expired through no fault of
 * theirs (DESIGN.md section 4's age floor, applied again after every outage).
 */
export class ServerContact {
  readonly connection: ConnectionWatch;
  private jetstreamAnswers = true;
  private steadySince: number;
  private timer: NodeJS.Timeout | null = null;
  private probing = false;

  constructor(
    nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly log: Logger,
    private readonly monotonic: () => number = () => performance.now(),
    /** When contact counts as steady from; default now (a backend that just connected). */
    steadySince?: number,
  ) {
    this.connection = new ConnectionWatch(nc, monotonic);
    this.steadySince = steadySince ?? monotonic();
    this.connection.onDisconnect(() => {
      this.log.warn('NATS connection lost: waiting for the server');
      // Not known to answer until a probe says so again.
      this.jetstreamAnswers = false;
      this.lose();
    });
    this.connection.onReconnect(() => {
      this.log.info('NATS connection back', { ...this.connection.stats() });
      this.steadySince = this.monotonic();
      void this.probe();
    });
  }

  /** Probes JetStream every second until {@link ServerContact.stop}. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.probe(), PROBE_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Connected, and JetStream answered its last probe. */
  get inContact(): boolean {
    return this.connection.connected && this.jetstreamAnswers;
  }

  get jetstream(): boolean {
    return this.jetstreamAnswers;
  }

  /** How long contact has held without a break; 0 while out of contact. */
  steadyForMs(): number {
    return this.inContact ? this.monotonic() - this.steadySince : 0;
  }

  /** A JetStream request of ours failed: the contact is not steady from here on. */
  noteFailure(): void {
    this.steadySince = this.monotonic();
  }

  stats(): ConnectionStats {
    return this.connection.stats();
  }

  private lose(): void {
    this.steadySince = this.monotonic();
  }

  private async probe(): Promise<void> {
    if (this.probing || !this.connection.connected) return;
    this.probing = true;
    try {
      const ok = await answersWithin(this.jsm.getAccountInfo(), PROBE_TIMEOUT_MS);
      if (ok !== this.jetstreamAnswers) {
        if (ok) this.log.info('JetStream answers again');
        else this.log.warn('JetStream does not answer: a cluster without quorum?');
        this.steadySince = this.monotonic();
      }
      this.jetstreamAnswers = ok;
    } finally {
      this.probing = false;
    }
  }
}

/** Whether `request` resolved within `ms`. */
async function answersWithin(request: Promise<unknown>, ms: number): Promise<boolean> {
  const answered = request.then(
    () => true,
    () => false,
  );
  return (await settleWithin(answered, ms)) === 'done' && (await answered);
}
