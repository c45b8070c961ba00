import { setTimeout as delay } from 'node:timers/promises';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../log.js';

/** How long one pull waits for a message before asking again. */
const DEFAULT_EXPIRES_MS = 5_000;
/** Pause after a failed pull (server restarting, consumer being created...). */
const PULL_RETRY_MS = 1_000;

/**
 * `lanes` lanes that each hold at most one message at a time: a message is asked for only
 * for a lane that is free, so the puller never holds more than `lanes` messages and each is
 * handled as soon as it arrives. `consume()` would prefetch messages whose lease runs out
 * while they wait. One pull asks for a message for every free lane at once: a pull per
 * message would cost a request for each, and a busy pool would wait on each in turn.
 */
export class SerialPuller {
  private stopping = false;
  private current: ConsumerMessages | null = null;
  private done: Promise<void> | null = null;
  private free: number;
  private readonly inHand = new Set<Promise<void>>();
  private wake: (() => void) | null = null;

  constructor(
    private readonly consumer: Consumer,
    private readonly handle: (msg: JsMsg) => Promise<void>,
    private readonly log: Logger,
    private readonly expiresMs = DEFAULT_EXPIRES_MS,
    lanes = 1,
    /** Awaited before each pull: the puller asks for nothing while it is pending. */
    private readonly gate: () => Promise<void> = () => Promise.resolve(),
  ) {
    this.free = Math.max(1, lanes);
  }

  start(): void {
    this.done ??= this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      if (this.free === 0) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      await this.gate();
      if (this.stopping) break;
      const asked = this.free;
      this.free = 0;
      let got = 0;
      try {
        const batch = await this.consumer.fetch({ max_messages: asked, expires: this.expiresMs });
        this.current = batch;
        for await (const msg of batch) {
          got++;
          const p = this.run(msg);
          this.inHand.add(p);
          void p.finally(() => this.inHand.delete(p));
          // The one lane: wait for it as a serial lane does, before the batch ends.
          if (asked === 1) await p;
        }
      } catch (err: unknown) {
        if (this.stopping) break;
        this.log.warn('pull failed', { err });
        await delay(PULL_RETRY_MS);
      } finally {
        this.current = null;
        this.release(asked - got);
      }
    }
  }

  /** Handles one message (never rejects: the handler settles its own message), then frees its lane. */
  private async run(msg: JsMsg): Promise<void> {
    try {
      await this.handle(msg);
    } catch (err: unknown) {
      this.log.warn('message handler failed', { err });
    } finally {
      this.release(1);
    }
  }

  private release(n: number): void {
    if (n <= 0) return;
    this.free += n;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** Stops asking for messages and waits for the messages in hand to be handled. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.current?.stop();
    this.wake?.();
    await this.done;
    await Promise.all([...this.inHand]);
  }
}
