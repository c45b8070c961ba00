import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { EventStore } from '../../streams/event-store.js';
import { EventWriter } from '../backend/projection/index.js';
import { ProjectionLoop } from '../backend/projection/index.js';
import { silentLogger } from '../log.js';
import type { CliContext } from './context.js';

/** What a CLI verb that writes events holds: the same write path as a backend. */
export interface WriteSession {
  store: EventStore;
  loop: ProjectionLoop;
  writer: EventWriter;
  jsm: JetStreamManager;
}

/**
 * Builds a projection loop and an EventWriter inside the CLI process, runs `fn`, and stops the
 * loop. Replaying the stream takes well under a second for a large log (~100k events/s), and
 * it makes every operator write judged by the machines and appended with optimistic
 * concurrency, exactly like a backend's, without adding verbs to the `sonar.api.*` contract.
 */
export async function withWriteSession<T>(
  ctx: CliContext,
  fn: (session: WriteSession) => Promise<T>,
): Promise<T> {
  const store = new EventStore(ctx.nc, ctx.names);
  const loop = new ProjectionLoop(store, silentLogger);
  await loop.start();
  try {
    return await fn({
      store,
      loop,
      writer: new EventWriter(store, loop),
      jsm: await jetstreamManager(ctx.nc),
    });
  } finally {
    await loop.stop();
  }
}
