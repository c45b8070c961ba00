/**
 * The single nats-server SIGKILLed mid-run and left down for longer than the pulse TTL (many
 * times over), then restarted on its port and store, while some tasks run through the whole
 * outage. An outage is not a death: the run completes with nothing lost, and no worker is
 * declared lost, no process replaced, and no task requeued but one whose dispatch the kill
 * cut in two (published, its message not sent).
 */
import { expect } from 'vitest';
import { freePorts } from '../helpers/nats-cluster.js';
import type { SecureNats } from '../helpers/secure-nats.js';
import { eventually } from '../helpers/eventually.js';
import { finishScenario, finalizingAgain } from '../chaos/scenario.js';
import type { Fault } from '../chaos/scenario.js';
import { parseLog } from '../chaos/invariants.js';
import type { LogLine } from '../chaos/invariants.js';
import type { WorldPerFile } from '../chaos/world-per-file.js';
import {
  SLEEP_COMMAND,
  httpStatus,
  longIds,
  saveProcessLogs,
  sleepyRun,
  waitStarted,
} from './long-run.js';

const WORKERS = 6;
const SLOTS = 4;
const LONG = 12;
const SHORT = 300;
/** Short tasks sleep this long: the run is still busy when the server goes down. */
const SHORT_S = 0.5;
/** Once the server answers again, the backend is ready within this. */
const READY_AGAIN_MS = 10_000;

export interface OutageScenario {
  name: string;
  /** The file's secure server and world. */
  chaos: WorldPerFile<SecureNats>;
  downMs: number;
}

export async function serverOutage(s: OutageScenario): Promise<void> {
  const [httpPort] = await freePorts(1);
  const w = await s.chaos.world({
    env: {
      // On this shared machine a stall of a few seconds (the load, or the client library's
      // backoff after the server's restart) outlasts the chaos tier's 5 s publish timeout,
      // and tasks requeued for that would hide any requeued because of the outage itself: a
      // minute is longer than any stall, and shorter than the 120 s outage. (Tasks the break
      // caught Published wait a further ack_wait for their message's redelivery: see
      // PlanConfig.dispatchAckWaitMs.)
      SONAR_PUBLISH_TIMEOUT: '60s',
      // Twice the slots in flight: the outage catches tasks Published, waiting for a slot,
      // and they must wait it out without being requeued.
      SONAR_CAPACITY_MULTIPLIER: '2',
    },
  });
  const backend = await w.startBackend({ SONAR_HTTP_PORT: String(httpPort) });
  // Supervised: a worker that exited on its own would be reported and replaced, and show.
  const originals = await w.startSupervisedWorkers(WORKERS, {
    slots: SLOTS,
    command: SLEEP_COMMAND,
  });
  // The long tasks outlast the outage by 10 s.
  const longS = s.downMs / 1_000 + 10;
  const runId = s.name;
  await w.submit(sleepyRun(runId, { long: LONG, longS, short: SHORT, shortS: SHORT_S }));
  await waitStarted(w, runId, longIds(LONG));
  await w.waitFinalized(SHORT * 0.2);
  expect(await httpStatus(httpPort!, '/readyz')).toBe(200);
  const published = (await w.status(runId)).tasks['Published'] ?? 0;
  expect(published, 'tasks Published, waiting for a slot').toBeGreaterThan(0);

  const fault: Fault = {
    what: `SIGKILL nats-server (~${published} tasks Published), down ${s.downMs / 1_000} s`,
    at: Date.now(),
  };
  await s.chaos.secure.server.kill('SIGKILL');
  const dead = Date.now();
  // Out of contact: not ready (send it nothing), but live (restarting it would not help).
  await eventually(async () => (await httpStatus(httpPort!, '/readyz')) === 503, {
    timeoutMs: 10_000,
    intervalMs: 250,
    message: '/readyz 503 while the server is down',
  });
  expect(await httpStatus(httpPort!, '/healthz')).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, fault.at + s.downMs - Date.now()));
  // Still so at the end of the outage, long past the pulse TTL.
  expect(await httpStatus(httpPort!, '/readyz')).toBe(503);
  expect(await httpStatus(httpPort!, '/healthz')).toBe(200);

  await s.chaos.secure.server.restart();
  const back = Date.now();
  await eventually(async () => (await httpStatus(httpPort!, '/readyz')) === 200, {
    timeoutMs: READY_AGAIN_MS,
    intervalMs: 100,
    message: `/readyz 200 within ${READY_AGAIN_MS} ms of the server's return`,
  });
  const readyAgainMs = Date.now() - back;

  const status = await w.waitRunEnded(runId, 300_000);
  expect(status.state).toBe('Succeeded');
  await saveProcessLogs(w);
  const report = await finishScenario(w, s.name, {
    faults: [fault],
    recovered: finalizingAgain(),
  });
  console.log(`chaos ${s.name}: /readyz 200 again ${readyAgainMs} ms after the restart`);
  expect(report.violations).toEqual([]);
  expect(report.stats.states).toEqual({ Succeeded: LONG + SHORT });
  // Nothing was judged: no worker lost, and no task requeued but one whose dispatch the kill
  // cut in two. The leader appends TaskPublished, then sends the message: a kill between the
  // two leaves an attempt without its message, which the dispatch audit requeues at once.
  const requeues = requeuesOf(parseLog(await w.exportLog()), fault.at, dead);
  expect(requeues.filter((r) => !r.cutByTheKill)).toEqual([]);
  expect(report.stats.workersLost).toBe(0);
  // Every process is the original one: no worker exited (none was replaced), the backend runs.
  expect(w.exits).toEqual([]);
  expect(w.workers).toEqual(originals);
  for (const p of originals) expect(p.running, `${p.name}: ${p.stderr().slice(-2_000)}`).toBe(true);
  expect(backend.proc.running, backend.proc.stderr().slice(-2_000)).toBe(true);
  expect(w.backends).toEqual([backend]);
}

/**
 * How long before the kill a dispatch may have started and still be cut by it: its append
 * and its send are milliseconds apart, but a stall of seconds between them happens on the
 * shared machine (see the publish timeout above).
 */
const DISPATCH_WINDOW_MS = 10_000;

interface Requeue {
  task: string;
  reason: unknown;
  attemptId: unknown;
  /** Its attempt was published just before the kill, and never started. */
  cutByTheKill: boolean;
}

/** Every TaskRequeued in `log`, judged against a kill sent at `killedAt`, done by `deadAt`. */
function requeuesOf(log: readonly LogLine[], killedAt: number, deadAt: number): Requeue[] {
  const published = new Map<unknown, number>();
  const started = new Set<unknown>();
  const out: Requeue[] = [];
  for (const e of log) {
    if (e.type === 'TaskPublished') published.set(e.data['attemptId'], Date.parse(e.time));
    if (e.type === 'TaskStarted') started.add(e.data['attemptId']);
    if (e.type !== 'TaskRequeued') continue;
    const attemptId = e.data['attemptId'];
    const at = published.get(attemptId);
    out.push({
      task: e.subject,
      reason: e.data['reason'],
      attemptId,
      cutByTheKill:
        e.data['reason'] === 'publish-timeout' &&
        at !== undefined &&
        at <= deadAt &&
        at >= killedAt - DISPATCH_WINDOW_MS &&
        !started.has(attemptId),
    });
  }
  return out;
}
