import type { Projection, TaskSnapshot } from '../projection.js';
import type { PlanConfig } from './config.js';
import { reconcilerEvent } from './decisions.js';
import type { Decisions, ReconcilerEvent, RequeueReason } from './decisions.js';
import type { Fleet, LiveWorker } from './fleet.js';

/** One task the tick takes back from its attempt. */
export interface Recovery {
  task: string;
  /** Dead: the counted recoveries inside the window reached the limit with this one. */
  dead: boolean;
  reason: RequeueReason;
}

/** Time since `iso` at `now`, or -Infinity when unknown (then nothing is old enough). */
const ageOf = (iso: string | null, now: number): number =>
  iso === null ? -Infinity : now - Date.parse(iso);

/**
 * Counted recoveries whose `TaskRequeued` (or `TaskDead`) time is inside the window, i.e.
 * strictly after `now - window` (DESIGN.md section 5, precise rules).
 */
export function recoveriesInWindow(
  recoveredAt: readonly string[],
  now: number,
  windowMs: number,
): number {
  const edge = now - windowMs;
  let n = 0;
  for (const t of recoveredAt) if (Date.parse(t) > edge) n++;
  return n;
}

/**
 * A live worker that does not hold its Running task: its registry entry, written a full pulse
 * TTL after the task started, does not list it. The worker gave the dispatch message back
 * (its `start` was carried out but the reply never came, so it `nak`ed as section 6 says) or
 * dropped it; nobody runs the task, and its worker pulses on, so rule 2 would never take it
 * back. The TTL margin covers a pulse composed before the start and stored after it.
 */
function givenBack(
  entry: LiveWorker | undefined,
  key: string,
  task: TaskSnapshot,
  config: PlanConfig,
): boolean {
  if (entry?.running === undefined || task.context.since === null) return false;
  if (entry.running.includes(key)) return false;
  return Date.parse(entry.pulseAt) - Date.parse(task.context.since) > config.pulseTtlMs;
}

function orphanReason(
  p: Projection,
  key: string,
  task: TaskSnapshot,
  fleet: Fleet,
  now: number,
  config: PlanConfig,
): RequeueReason | null {
  const workerId = task.context.workerId;
  const worker = workerId === null ? undefined : p.workers.get(workerId)?.snapshot;
  // A supervisor saw the process end, or an operator revoked it: nothing to wait for,
  // whatever the task's age.
  const lostNow =
    worker?.context.lostReason === 'exited' || worker?.context.lostReason === 'revoked';
  if (worker?.value === 'Lost' && lostNow) return 'worker-lost';
  if (workerId !== null && fleet.live.has(workerId)) {
    // Not counted: the worker is alive and the payload did it no harm.
    return givenBack(fleet.entries.get(workerId), key, task, config) ? 'worker-released' : null;
  }
  // A missing key means the worker is gone only once we have watched the registry for a TTL.
  if (!config.ageFloorPassed) return null;
  return ageOf(task.context.since, now) > config.orphanAgeMs ? 'worker-lost' : null;
}

/**
 * Rules 1 to 3 of DESIGN.md section 4, over the tasks in flight only (Published, then Running,
 * each in the order they entered the state): a publish timeout and an orphaned Running task go
 * back to Pending; a counted (`worker-lost`) recovery that reaches the limit inside the window
 * goes Dead instead. No fixed command timeout: a task its live worker holds is never touched
 * (one it no longer lists goes back as `worker-released`, see givenBack).
 *
 * `undelivered` names attempts whose dispatch message the caller looked for, after the state
 * it judges, and did not find: a leader died between appending `TaskPublished` and sending
 * the message, or the send failed. No worker can ever start such a task, so it goes back at
 * once, as a publish timeout (not counted), instead of waiting the timeout out.
 */
export function judgeRecoveries(
  p: Projection,
  fleet: Fleet,
  now: number,
  config: PlanConfig,
  undelivered: ReadonlySet<string> = new Set(),
): Recovery[] {
  const out: Recovery[] = [];
  for (const key of p.tasksByState.Published) {
    const task = p.tasks.get(key)!.snapshot;
    const age = ageOf(task.context.since, now);
    const steady = config.steadyContactMs ?? Infinity;
    const waited = age <= steady ? age : steady - (config.dispatchAckWaitMs ?? 0);
    const lost = task.context.attemptId !== null && undelivered.has(task.context.attemptId);
    // Not counted: the task may just have waited behind long tasks.
    if (lost || waited > config.publishTimeoutMs) {
      out.push({ task: key, dead: false, reason: 'publish-timeout' });
    }
  }
  for (const key of p.tasksByState.Running) {
    const task = p.tasks.get(key)!.snapshot;
    const reason = orphanReason(p, key, task, fleet, now, config);
    if (reason === null) continue;
    const counted = recoveriesInWindow(task.context.recoveredAt, now, config.recoveryWindowMs) + 1;
    const dead = reason === 'worker-lost' && counted >= config.recoveryLimit;
    out.push({ task: key, dead, reason });
  }
  return out;
}

/**
 * The events that carry out a tick's requeues and deaths. `recoveries` counts the counted
 * recoveries over the task's whole life, this one included (`publish-timeout` adds none).
 */
export function recoveryEvents(p: Projection, decisions: Decisions): ReconcilerEvent[] {
  const out: ReconcilerEvent[] = [];
  for (const { task: key } of decisions.dead) {
    const { snapshot, seq } = p.tasks.get(key)!;
    const recoveries = snapshot.context.recoveries + 1;
    out.push(
      reconcilerEvent(
        { kind: 'task', key },
        'TaskDead',
        { reason: 'recovery-limit', recoveries },
        seq,
      ),
    );
  }
  for (const { task: key, reason } of decisions.requeue) {
    const { snapshot, seq } = p.tasks.get(key)!;
    const c = snapshot.context;
    const recoveries = c.recoveries + (reason === 'worker-lost' ? 1 : 0);
    out.push(
      reconcilerEvent(
        { kind: 'task', key },
        'TaskRequeued',
        { attemptId: c.attemptId!, reason, recoveries },
        seq,
      ),
    );
  }
  return out;
}
