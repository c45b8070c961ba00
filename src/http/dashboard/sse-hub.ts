import type { ServerResponse } from 'node:http';
import type { EventRecord } from '../../../actors/projection.js';
import type { ProjectionLoop } from '../../backend/projection/index.js';
import { matchesFilter } from './event-filter.js';
import type { EventFilter } from './event-filter.js';
import { publicEvent } from './views/public-event.js';

/**
 * `events`: every matching event, as the Events page's tail needs.
 * `changes`: at most one small notice per flush interval saying what kinds of aggregate
 * changed; pages re-render on it, so a busy stream costs a page a few requests a second, not
 * one message per event.
 */
export type StreamMode = 'events' | 'changes';

export interface StreamRequest {
  mode: StreamMode;
  filter: EventFilter;
  /** Resume after this stream sequence: recent events past it are sent first (no gap). */
  after?: number;
  /** Also notify registry changes (pulses), for the Overview's pulse ages and slots. */
  registry?: boolean;
}

interface Client {
  res: ServerResponse;
  req: StreamRequest;
  /** Events not sent because the socket was not draining; reported as one `gap`. */
  dropped: number;
  changed: Set<string>;
  lastSeq: number;
}

export interface EventHubOptions {
  /** Recent events kept for new tails and `/api/events`. @defaultValue 1000 */
  recent?: number;
  /** How often `changes` clients hear of changes, at most. @defaultValue 250 */
  flushMs?: number;
  /** A comment line this often keeps idle connections open through proxies. @defaultValue 15000 */
  heartbeatMs?: number;
}

/**
 * Server-Sent Events fed by the projection loop's `onApplied` (the event stream), so pages go
 * live without polling any table. One hub per dashboard; it keeps the last events in a ring
 * for new tails. A client that reads too slowly loses events (reported as a `gap`), never
 * the backend's memory.
 */
export class EventHub {
  private readonly ring: EventRecord[] = [];
  private readonly clients = new Set<Client>();
  private readonly size: number;
  private readonly flushMs: number;
  private readonly heartbeatMs: number;
  private unsubscribe: (() => void) | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(
    private readonly loop: ProjectionLoop,
    opts: EventHubOptions = {},
  ) {
    this.size = opts.recent ?? 1000;
    this.flushMs = opts.flushMs ?? 250;
    this.heartbeatMs = opts.heartbeatMs ?? 15_000;
  }

  start(): void {
    this.unsubscribe = this.loop.onApplied((_applied, record) => this.onEvent(record));
    this.heartbeat = setInterval(() => {
      for (const c of this.clients) write(c, ': ping\n\n');
    }, this.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Ends every stream (shutdown): the server can then close its connections. */
  stop(): void {
    this.unsubscribe?.();
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    for (const c of this.clients) c.res.end();
    this.clients.clear();
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** The last `limit` recent events that pass `filter`, oldest first. */
  recent(filter: EventFilter, limit: number): EventRecord[] {
    const out: EventRecord[] = [];
    for (let i = this.ring.length - 1; i >= 0 && out.length < limit; i--) {
      const r = this.ring[i]!;
      if (matchesFilter(r.subject, r.type, filter)) out.push(r);
    }
    return out.reverse();
  }

  /**
   * Streams to `res` until the client goes away or the hub stops; resolves then (the HTTP
   * server ends a response whose handler has returned, so the handler awaits this).
   */
  attach(res: ServerResponse, req: StreamRequest): Promise<void> {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    const client: Client = { res, req, dropped: 0, changed: new Set(), lastSeq: 0 };
    write(client, `retry: 2000\n: connected at ${this.loop.position}\n\n`);
    if (req.mode === 'events' && req.after !== undefined) {
      for (const r of this.ring) if (r.seq > req.after) this.sendEvent(client, r);
    }
    this.clients.add(client);
    return new Promise((resolve) => {
      res.once('close', () => {
        this.clients.delete(client);
        resolve();
      });
    });
  }

  /** Registry changes (pulses) come from a KV watch, not the event stream. */
  registryChanged(): void {
    for (const c of this.clients) {
      if (c.req.mode === 'changes' && c.req.registry) c.changed.add('registry');
    }
    this.scheduleFlush();
  }

  private onEvent(r: EventRecord): void {
    this.ring.push(r);
    if (this.ring.length > this.size) this.ring.splice(0, this.ring.length - this.size);
    if (this.clients.size === 0) return;
    let changes = false;
    for (const c of this.clients) {
      if (!matchesFilter(r.subject, r.type, c.req.filter)) continue;
      if (c.req.mode === 'events') this.sendEvent(c, r);
      else {
        c.changed.add(r.subject.split('.')[2] ?? 'event');
        c.lastSeq = r.seq;
        changes = true;
      }
    }
    if (changes) this.scheduleFlush();
  }

  private sendEvent(c: Client, r: EventRecord): void {
    if (c.res.writableNeedDrain) {
      c.dropped++;
      return;
    }
    if (c.dropped > 0) {
      write(c, `event: gap\ndata: ${JSON.stringify({ dropped: c.dropped })}\n\n`);
      c.dropped = 0;
    }
    write(c, `id: ${r.seq}\nevent: event\ndata: ${JSON.stringify(publicEvent(r))}\n\n`);
  }

  private scheduleFlush(): void {
    if (this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      for (const c of this.clients) {
        if (c.changed.size === 0 || c.res.writableNeedDrain) continue;
        const data = { kinds: [...c.changed], seq: c.lastSeq };
        c.changed.clear();
        write(c, `event: change\ndata: ${JSON.stringify(data)}\n\n`);
      }
    }, this.flushMs);
  }
}

function write(c: Client, chunk: string): void {
  if (!c.res.writableEnded) c.res.write(chunk);
}
