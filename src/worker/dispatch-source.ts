/**
 * Where a worker's pull loop takes a tag's dispatch messages from: the tag's consumer itself,
 * or (secure mode, when the enrollment names a pull subject) a backend that pulls it for the
 * worker (./backend-pull.ts). The loop is the same either way.
 *
 * @module
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { isConsumerNotFoundApiError } from '../../streams/errors.js';

/** A dispatch message as a worker handles it: what it reads of it, and how it settles it. */
export type Delivery = Pick<JsMsg, 'seq' | 'headers' | 'json' | 'ack' | 'nak' | 'term'>;

/** One pull's messages; `close` stops taking more (what comes after is redelivered later). */
export interface PullBatch extends AsyncIterable<Delivery> {
  close(): Promise<unknown>;
}

export interface DispatchSource {
  /** Up to `batch` messages, waiting up to `expiresMs` for them. */
  pull(batch: number, expiresMs: number): Promise<PullBatch>;
  /** After a failed pull: whether the tag's consumer is gone, so the worker must join again. */
  gone(err: unknown): Promise<boolean>;
}

/** Pulls the tag's consumer directly. */
export class ConsumerSource implements DispatchSource {
  constructor(private readonly consumer: Consumer) {}

  pull(batch: number, expiresMs: number): Promise<PullBatch> {
    return this.consumer.fetch({ max_messages: batch, expires: expiresMs });
  }

  async gone(): Promise<boolean> {
    try {
      await this.consumer.info();
      return false;
    } catch (err: unknown) {
      return isConsumerNotFoundApiError(err);
    }
  }
}
