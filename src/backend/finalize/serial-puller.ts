import { setTimeout as delay } from 'node:timers/promises';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../log.js';

/** How long one pull waits for a message before asking again. */
const DEFAULT_EXPIRES_MS = 5_000;
/** Pause after a failed pull (server restarting, consumer being created...). */
const PULL_RETRY_MS = 1_000;

/**
 * One pull lane that holds exactly one message at a time: it asks for the next message only
 * once the handler has finished with the current one. `consume()` would prefetch a second
 * message whose lease runs out while it waits, and a pool of N lanes would hold more than N.
 */
export class SerialPuller {
  private stopping = false;
  private current: ConsumerMessages | null = null;
  private done: Promise<void> | null = null;

  constructor(
    private readonly consumer: Consumer,
    private readonly handle: (msg: JsMsg) => Promise<void>,
    private readonly log: Logger,
    private readonly expiresMs = DEFAULT_EXPIRES_MS,
  ) {}

  start(): void {
    this.done ??= this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        const batch = await this.consumer.fetch({ max_messages: 1, expires: this.expiresMs });
        this.current = batch;
        for await (const msg of batch) await this.handle(msg);
      } catch (err: unknown) {
        if (this.stopping) break;
        this.log.warn('pull failed', { err });
        await delay(PULL_RETRY_MS);
      } finally {
        this.current = null;
      }
    }
  }

  /** Stops asking for messages and waits for the message in hand to be handled. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.current?.stop();
    await this.done;
  }
}
