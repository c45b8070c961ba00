import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it, expect } from 'vitest';
import { replay } from '../../actors/replay.js';
import { replayView } from '../../actors/replay-view.js';
import { referenceReplay } from '../helpers/reference-fold.js';

/**
 * Replay scenarios (STYLE.md C9, DESIGN.md section 8): each `scenarios/<name>.jsonl` is folded
 * by `replay()` and its `sonar replay --json` view must match `<name>.expected.json`
 * (regenerate with `npx vitest run --project replay -u`, then read the diff by hand).
 */
const dir = fileURLToPath(new URL('./scenarios/', import.meta.url));

/**
 * The `seq` of every line each scenario must skip, in order. A skip not declared here fails
 * the test, as an unexpected history event does in Temporal's replay tests.
 */
const EXPECTED_SKIPS: Record<string, number[]> = {
  'happy-path-two-steps': [],
  // not JSON, an array, no subject, a bad time, no time, a dispatch subject, a bad id,
  // a numeric subject, `null`, a truncated line (line numbers stand in for unreadable seqs)
  'bad-lines': [2, 3, 102, 103, 104, 106, 107, 108, 13, 16],
  // unknown type, wrong case, no type, bad tokenHash, v2, no tags, no workerId,
  // unknown requeue reason, unknown worker event, data not an object
  'unknown-event-types': [4, 5, 6, 7, 8, 10, 11, 13, 14, 15],
  // attempt 3 after 1, then start/result/fail/requeue of the stale attempt, a second
  // publish while Running, finalize/poison of the stale attempt
  'refused-stale-attempt': [10, 12, 14, 15, 16, 17, 19, 20],
  // everything after line 21: events after terminal states, duplicate creations,
  // a comeback join, an unknown task, a creation whose data names another task
  'refused-after-terminal': [22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36],
  'recovery-counting': [],
  // publishes after a task has failed for good
  attempts: [28, 42],
  // StepSucceeded while Blocked
  'poisoned-retry-succeeds': [15],
  'poisoned-cancelled': [],
  // a finalization and a result arriving after the cancel
  'run-cancelled': [32, 33],
  // starved twice, a Waiting step starved, served twice
  'step-starved-served': [8, 9, 13],
  // a Waiting step starved, StepReady twice
  'step-waiting-ready': [13, 19],
  // StepReady on a Skipped step
  'failed-step-skips-later': [22],
  // a second drain, a comeback join, Left after Lost, Lost after Left, a bad lost reason,
  // an unknown worker
  'worker-states': [10, 18, 19, 20, 21, 22],
  // an election on a task subject, a creation on a system subject, an empty nodeId,
  // a worker event on a system subject
  'reconciler-elected': [8, 9, 10, 11],
  // TaskStarted before its publish (line 5), a bad time (line 8), a duplicate finalize (line 11)
  'line-without-seq': [5, 8, 11],
  // RunExpired of a Running run, with another final state, on a task subject, on another
  // run's subject; a second expiry; a task, a step and a run created under the expired id; an
  // evicted task's event; WorkerExpired of an Active worker, of an evicted one, on a run subject
  'retention-expiry': [21, 22, 23, 24, 26, 27, 28, 29, 30, 32, 35, 36],
  // a task priority out of range, a notBefore that is no time, an unknown backoff
  'priorities-and-delays': [12, 13, 14],
  // an election whose tagRates is not a string
  'rate-limits': [17],
  // A second fire of a due time and an earlier one; a due fire while paused; the same manual
  // run twice; a due time of the pause after resume; a fire, a resume and a re-creation after
  // delete; a creation under another name, with both cron and interval, with an unknown
  // policy; a fire of an unknown schedule; a schedule event on a run subject
  schedules: [8, 9, 16, 21, 23, 37, 38, 39, 40, 41, 42, 43, 44],
  // A second refusal of the same run; a refusal after delete. The refused run no longer
  // counts as going: the next due time submits a run (overlap skip).
  'schedule-run-refused': [6, 12],
  // Exported from chaos runs (test/chaos/, `SONAR_CHAOS_SAVE=1`): 500-600 tasks each, real
  // kills and restarts. A backend never appends an event its machine refuses: no skips.
  'chaos-backend-failover': [],
  'chaos-cluster-leader': [],
  'chaos-finalizers-killed': [],
  'chaos-poison-payload': [],
  // A schedule every 2 s across two leaders SIGKILLed (test/chaos/schedules.test.ts).
  'chaos-schedule-failover': [],
  'chaos-server-restart': [],
  'chaos-workers-killed': [],
};

/** The reconciler leader after the fold, where a scenario elects one. */
const EXPECTED_LEADER: Record<string, { nodeId: string; seq: number }> = {
  'happy-path-two-steps': { nodeId: 'backend-a', seq: 1 },
  'worker-states': { nodeId: 'backend-a', seq: 1 },
  'reconciler-elected': { nodeId: 'backend-a', seq: 13 },
  'priorities-and-delays': { nodeId: 'backend-b', seq: 1 },
  'rate-limits': { nodeId: 'backend-a', seq: 1 },
  schedules: { nodeId: 'backend-a', seq: 1 },
  'schedule-run-refused': { nodeId: 'backend-a', seq: 1 },
  // The chaos runs' last elections (a failover elects again; the first leader may keep it).
  'chaos-backend-failover': { nodeId: 'vm-2ldwts2H', seq: 1775 },
  'chaos-cluster-leader': { nodeId: 'vm-SZIfiWFr', seq: 1 },
  'chaos-finalizers-killed': { nodeId: 'vm-IopnPVgj', seq: 2765 },
  'chaos-poison-payload': { nodeId: 'vm-N7uSzyV4', seq: 1 },
  'chaos-schedule-failover': { nodeId: 'vm-nZSVBfpt', seq: 29 },
  'chaos-server-restart': { nodeId: 'vm-ULszDO94', seq: 1194 },
  'chaos-workers-killed': { nodeId: 'vm-0PieI6hv', seq: 1 },
};

const scenarios = readdirSync(dir)
  .filter((f) => f.endsWith('.jsonl'))
  .map((f) => f.slice(0, -'.jsonl'.length))
  .sort();

const linesOf = (name: string): string[] =>
  readFileSync(new URL(`./scenarios/${name}.jsonl`, import.meta.url), 'utf8').split('\n');

describe('replay scenarios', () => {
  it('every scenario declares its expected skips, and there are at least 14', () => {
    expect(scenarios).toEqual(Object.keys(EXPECTED_SKIPS).sort());
    expect(scenarios.length).toBeGreaterThanOrEqual(14);
  });

  describe.each(scenarios)('%s', (name) => {
    const lines = linesOf(name);

    it('matches its expected replay view', async () => {
      const { projection, skipped } = replay(lines);
      const view = replayView(projection, skipped);
      await expect(JSON.stringify(view, null, 2)).toMatchFileSnapshot(
        `./scenarios/${name}.expected.json`,
      );
    });

    it('skips exactly the declared lines', () => {
      const { skipped } = replay(lines);
      expect(skipped.map((s) => s.seq)).toEqual(EXPECTED_SKIPS[name]);
      for (const s of skipped) expect(s.reason).not.toBe('');
    });

    it('folds the same with the public transition() (reference fold)', () => {
      const { projection, skipped } = replay(lines);
      const reference = referenceReplay(lines);
      expect(JSON.stringify(reference.view)).toBe(JSON.stringify(replayView(projection, skipped)));
      expect(reference.leader).toEqual(projection.leader);
    });

    it('elects the expected leader', () => {
      const { projection } = replay(lines);
      const expected = EXPECTED_LEADER[name];
      if (expected) expect(projection.leader).toMatchObject(expected);
      else expect(projection.leader).toBeNull();
    });
  });
});
