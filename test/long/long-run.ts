/**
 * What the long chaos scenarios share: a run whose tasks sleep as long as their payload says
 * (some longer than the outage they live through), a wait for given tasks to be Running, and
 * the backend's HTTP probes.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JetStreamManager } from '@nats-io/jetstream';
import { EventStore } from '../../streams/event-store.js';
import type { RunFile } from '../../src/protocol.js';
import { eventually } from '../helpers/eventually.js';
import { workRun } from '../chaos/world.js';
import type { ChaosWorld } from '../chaos/world.js';

/** The task command: sleep for the payload's `sleep` seconds, then echo the payload back. */
export const SLEEP_COMMAND = [
  'sh',
  '-c',
  `read -r x; sleep "$(printf '%s' "$x" | sed 's/.*"sleep":\\([0-9.]*\\).*/\\1/')"; echo "$x"`,
];

/** Ids of the long tasks of {@link sleepyRun}: `long0`, `long1`, ... */
export const longIds = (count: number): string[] =>
  Array.from({ length: count }, (_, i) => `long${i}`);

/**
 * A run of `long` tasks that sleep `longS` seconds each, then `short` tasks that sleep
 * `shortS` seconds each, in one JSON step.
 */
export function sleepyRun(
  runId: string,
  opts: { long: number; longS: number; short: number; shortS: number },
): RunFile {
  return workRun(runId, [
    ...longIds(opts.long).map((id, n) => ({ id, input: { n, sleep: opts.longS } })),
    ...Array.from({ length: opts.short }, (_, n) => ({
      id: `t${n}`,
      input: { n, sleep: opts.shortS },
    })),
  ]);
}

/** Waits until every task of `ids` in run `runId` has a `TaskStarted` in the log. */
export async function waitStarted(
  w: ChaosWorld,
  runId: string,
  ids: string[],
  timeoutMs = 60_000,
): Promise<void> {
  await eventually(
    async () => {
      const started = new Set<string>();
      await new EventStore(w.nc, w.n).replay(
        (r) => {
          if (r.type === 'TaskStarted') started.add(r.subject.split('.').at(-1)!);
        },
        { filter: w.n.subjects.task(runId, '*') },
      );
      return ids.every((id) => started.has(id));
    },
    { timeoutMs, intervalMs: 500, message: `${ids.length} tasks started` },
  );
}

/** The HTTP status of `GET http://127.0.0.1:<port><path>`, or 0 when nothing answers. */
export async function httpStatus(port: number, path: string): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      signal: AbortSignal.timeout(5_000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/**
 * With `SONAR_CHAOS_LOGS=<dir>`, writes every process's stderr (its JSON log) there, one file
 * per process, for a look at what each one went through. A cluster's nats-servers log there
 * too, as they run (nats-cluster.ts).
 */
export async function saveProcessLogs(w: ChaosWorld): Promise<void> {
  const dir = process.env['SONAR_CHAOS_LOGS'];
  if (!dir) return;
  await mkdir(dir, { recursive: true });
  for (const p of [...w.backends.map((b) => b.proc), ...w.workers]) {
    await writeFile(join(dir, `${p.name}-${p.pid}.log`), p.stderr());
  }
}

/**
 * Waits until the events stream's two followers are current again: a restarted or returned
 * node caught up with the log.
 */
export async function waitReplicasCurrent(jsm: JetStreamManager, w: ChaosWorld): Promise<void> {
  await eventually(
    async () => {
      const i = await jsm.streams.info(w.n.streams.events);
      const replicas = i.cluster?.replicas ?? [];
      return replicas.length === 2 && replicas.every((r) => r.current);
    },
    { timeoutMs: 30_000, intervalMs: 200, message: 'replicas current' },
  );
}
