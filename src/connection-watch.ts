import type { NatsConnection } from '@nats-io/transport-node';

/** What a connection has been through since the watch started (metrics, health). */
export interface ConnectionStats {
  disconnects: number;
  reconnects: number;
  /** Time spent disconnected, the current outage included. */
  disconnectedMs: number;
}

/**
 * Follows one connection's status: whether it is up now, since when, and how often it was
 * lost. The clock is monotonic and injectable. `onReconnect` listeners run after every
 * reconnect (a worker pulses at once; a reconciler restarts its age floor).
 */
export class ConnectionWatch {
  private connectedNow = true;
  private downSince: number | null = null;
  private downTotalMs = 0;
  private disconnectCount = 0;
  private reconnectCount = 0;
  private readonly listeners = new Set<() => void>();
  private readonly lostListeners = new Set<() => void>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly monotonic: () => number = () => performance.now(),
  ) {
    void this.follow();
  }

  /** Up now: connected, and not closed for good. */
  get connected(): boolean {
    return this.connectedNow && !this.nc.isClosed();
  }

  /** The connection closed for good (an authorization error, or a deliberate close). */
  get closed(): boolean {
    return this.nc.isClosed();
  }

  stats(): ConnectionStats {
    const current = this.downSince === null ? 0 : this.monotonic() - this.downSince;
    return {
      disconnects: this.disconnectCount,
      reconnects: this.reconnectCount,
      disconnectedMs: this.downTotalMs + current,
    };
  }

  /** Calls `fn` after each reconnect; returns the unsubscribe function. */
  onReconnect(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Calls `fn` at each disconnect; returns the unsubscribe function. */
  onDisconnect(fn: () => void): () => void {
    this.lostListeners.add(fn);
    return () => this.lostListeners.delete(fn);
  }

  private async follow(): Promise<void> {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === 'disconnect' && this.connectedNow) {
          this.connectedNow = false;
          this.disconnectCount++;
          this.downSince = this.monotonic();
          for (const fn of this.lostListeners) fn();
        } else if (s.type === 'reconnect') {
          this.connectedNow = true;
          this.reconnectCount++;
          if (this.downSince !== null) this.downTotalMs += this.monotonic() - this.downSince;
          this.downSince = null;
          for (const fn of this.listeners) fn();
        }
      }
    } catch (_err: unknown) {
      // The status iterator ends with the connection: `closed` says so from then on.
    }
  }
}
