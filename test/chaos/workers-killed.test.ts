import { readFile, readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { finishScenario, lostWorkRestarted } from './scenario.js';
import type { Fault } from './scenario.js';
import { chaosRun, echoCommand } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 500;
const FLEET = 10;
/**
 * The echo task, slowed so that the run still has tasks to start when a fifth of it is
 * finalized: finalization trails the workers, and with 50 ms tasks a loaded machine could
 * finish running every task before a wave is due, leaving no work to lose.
 */
const SLOW_ECHO = echoCommand(0.3);

const chaos = worldOnServer();

/** The pids whose parent is one of `pids`, from /proc: a worker's task processes. */
async function withChildren(pids: Set<number>): Promise<Set<number>> {
  const parents = new Set<number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // `pid (comm) state ppid ...`: comm may hold spaces, so count from its closing paren
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (pids.has(ppid)) parents.add(ppid);
  }
  return parents;
}

/** `n` distinct random picks from `from`. */
function pick<T>(from: T[], n: number): T[] {
  const pool = [...from];
  const out: T[] = [];
  while (out.length < n && pool.length > 0) {
    out.push(pool.splice(Math.floor(Math.random() * pool.length), 1)[0]!);
  }
  return out;
}

describe('chaos: workers SIGKILLed mid-run while new ones join', () => {
  it('recovers every lost task; each result is finalized once', async () => {
    const world = await chaos.running(chaosRun('kill-workers', TASKS), {
      backends: 1,
      workers: FLEET,
      command: SLOW_ECHO,
    });

    // Two waves, each killing 20% of the live fleet (SIGKILL: no drain, no release, no
    // leave) and starting as many new workers, which join while the run goes on.
    const faults: Fault[] = [];
    const victims: string[] = [];
    for (const progress of [0.2, 0.5]) {
      await world.waitFinalized(Math.floor(TASKS * progress));
      // At least one victim is caught running a task (its command is its child), so that
      // work is lost with it whatever the timing: tasks are short, and a worker is often
      // between them.
      const wave = await eventually(
        async () => {
          const live = world.workers.filter((w) => w.running);
          const busy = await withChildren(new Set(live.map((w) => w.pid)));
          const first = live.find((w) => busy.has(w.pid));
          if (first === undefined) return false;
          return [
            first,
            ...pick(
              live.filter((w) => w !== first),
              FLEET / 5 - 1,
            ),
          ];
        },
        { timeoutMs: 30_000, intervalMs: 10, message: 'a worker running a task' },
      );
      faults.push({ what: `SIGKILL ${wave.map((v) => v.name).join(',')}`, at: Date.now() });
      victims.push(...wave.map((v) => v.name));
      await Promise.all(wave.map((v) => v.kill('SIGKILL')));
      // The newcomers join while the run goes on; the next wave may pick them.
      await world.startSupervisedWorkers(wave.length, { command: SLOW_ECHO });
    }

    const status = await world.waitRunEnded('kill-workers');
    expect(status.state).toBe('Succeeded');
    // Every victim is declared Lost once its key expires (the run may end before the last).
    await eventually(
      async () => {
        const states = await world.workerStates();
        return victims.every((v) => states.get(v) === 'Lost');
      },
      { timeoutMs: 30_000, message: 'every victim Lost' },
    );
    const report = await finishScenario(world, 'workers-killed', {
      faults,
      recovered: lostWorkRestarted,
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: TASKS });
    // The four victims (their keys expired), and any live worker a loaded machine starved.
    expect(report.stats.workersLost).toBeGreaterThanOrEqual(victims.length);
    expect(report.stats.recoveries['worker-lost']).toBeGreaterThan(0);
    expect(report.recoveredMs.every((ms) => ms >= 0)).toBe(true);
  });
});
