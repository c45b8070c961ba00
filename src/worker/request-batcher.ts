import { ErrorCode } from '../../actors/errors.js';
import { MAX_BATCH } from '../protocol.js';
import type { BatchableVerb, RequestOf } from '../protocol.js';
import { isApiError, okOf } from './api-client.js';
import type { ApiClient, CallOptions } from './api-client.js';
import { BATCH_TRACEPARENT_PREFIX } from '../tracing/traceparent.js';

interface Pending {
  verb: BatchableVerb;
  body: RequestOf<BatchableVerb>;
  opts: CallOptions;
  resolve: (ok: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * Sends the `start` and `result` requests a worker makes in the same turn of the event loop
 * (the messages of one pull, the tasks that finished together) as one `batch` request: one
 * round trip instead of one per task. A request alone goes alone. Each answer of a batch
 * settles its own call as a lone request would, except that `unavailable` sends that
 * request again alone, with its own retries; so does any failure of the batch as a whole
 * (every verb is idempotent on the backend). A backend that predates `batch` answers
 * `not_found`: from then on every request goes alone.
 */
export class RequestBatcher {
  private queue: Pending[] = [];
  private scheduled = false;
  private supported = true;

  constructor(
    private readonly api: ApiClient,
    private readonly workerId: string,
  ) {}

  request(verb: BatchableVerb, body: RequestOf<BatchableVerb>, opts: CallOptions = {}) {
    if (!this.supported) return this.api.request(verb, body, opts);
    return new Promise<unknown>((resolve, reject) => {
      this.queue.push({ verb, body, opts, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const all = this.queue.splice(0);
    for (let i = 0; i < all.length; i += MAX_BATCH) {
      const items = all.slice(i, i + MAX_BATCH);
      if (items.length === 1 || !this.supported) for (const it of items) this.alone(it);
      else void this.send(items);
    }
  }

  private alone(it: Pending): void {
    this.api.request(it.verb, it.body as never, it.opts).then(it.resolve, it.reject);
  }

  private async send(items: Pending[]): Promise<void> {
    let replies: unknown[];
    try {
      const ok = await this.api.request<'batch', { replies?: unknown }>(
        'batch',
        {
          workerId: this.workerId,
          requests: items.map((it) => ({ verb: it.verb, body: it.body })),
        },
        // One try: on no answer, each request goes alone with its own retries.
        {
          retryForMs: 0,
          ...(items[0]!.opts.signal && { signal: items[0]!.opts.signal }),
          ...traceHeadersOf(items),
        },
      );
      if (!Array.isArray(ok.replies) || ok.replies.length !== items.length) {
        // Caught just below, like any failed batch: each request then goes alone.
        throw new Error('batch: the answers do not match the requests');
      }
      replies = ok.replies;
    } catch (err: unknown) {
      if (isApiError(err, ErrorCode.NotFound)) this.supported = false;
      for (const it of items) this.alone(it);
      return;
    }
    items.forEach((it, i) => {
      try {
        it.resolve(okOf(it.verb, replies[i]));
      } catch (err: unknown) {
        if (isApiError(err, ErrorCode.Unavailable)) this.alone(it);
        else it.reject(err);
      }
    });
  }
}

/** Each traced request's `traceparent`, by its index in the batch; nothing when none is. */
function traceHeadersOf(items: Pending[]): Pick<CallOptions, 'headers'> {
  const headers: Record<string, string> = {};
  items.forEach((it, i) => {
    if (it.opts.traceparent !== undefined) {
      headers[`${BATCH_TRACEPARENT_PREFIX}${i}`] = it.opts.traceparent;
    }
  });
  return Object.keys(headers).length === 0 ? {} : { headers };
}
