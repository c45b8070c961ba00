import { describe, expect, it } from 'vitest';
import { finishScenario, firstAfter } from './scenario.js';
import { chaosRun } from './world.js';
import { worldOnServer } from './world-per-file.js';

const TASKS = 500;
const POISON = 't7';

const chaos = worldOnServer();

describe('chaos: a poison payload that kills every worker that runs it', () => {
  it('ends Dead after the recovery limit while the rest of the run completes', async () => {
    // Supervised: each crashed worker is reported (`exited`) and replaced, as `sonar workers`
    // or Kubernetes would; the report makes the recovery immediate (DESIGN.md section 4).
    // One slot each: a task that shares a worker with the poison task is lost with it, and
    // three such losses would kill that bystander too (see the faults table in docs/faults.md).
    const w = await chaos.running(chaosRun('poison', TASKS, [POISON]), {
      backends: 1,
      workers: 8,
      slots: 1,
    });

    const status = await w.waitRunEnded('poison');
    // The Dead task fails its step, and the step the run; every other task succeeded.
    expect(status.state).toBe('Failed');
    const report = await finishScenario(w, 'poison-payload', {
      // From the first start of the poison task (its first crash) to its death.
      faults: (log) => [
        {
          what: `payload of ${POISON} SIGKILLs its worker`,
          at: Date.parse(
            log.find((e) => e.type === 'TaskStarted' && e.subject.endsWith(`.${POISON}`))!.time,
          ),
        },
      ],
      recovered: firstAfter((e) => e.type === 'TaskDead'),
    });
    expect(report.violations).toEqual([]);
    expect(report.stats.states).toEqual({ Succeeded: TASKS - 1, Dead: 1 });
    const dead = report.projection.tasks.get(`poison.${POISON}`)!.snapshot;
    expect(dead.value).toBe('Dead');
    // recoveryLimit 3: two requeues, then the third counted recovery is the death itself.
    expect(dead.context.recoveries).toBe(3);
    expect(report.stats.recoveries['dead']).toBe(1);
    // Three crashes, each reported by the supervisor (more if a starved worker was fenced).
    expect(w.exits.length).toBeGreaterThanOrEqual(3);
    expect(w.exits.every((e) => e.signal === 'SIGKILL')).toBe(true);
    // Each was reported over the supervisor credential and accepted.
    expect(w.exitReportFailures).toEqual([]);
  });
});
