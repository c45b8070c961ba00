import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ScheduleFired } from '../../actors/schedule/schedule.events.js';
import { scheduledRunId } from '../../actors/schedule/schedule-run-ids.js';
import { EventStore } from '../../streams/event-store.js';
import type { RequestOf } from '../../src/protocol.js';
import { ApiClient } from '../../src/worker/api-client.js';
import { eventually } from '../helpers/eventually.js';
import { saveScenario } from './scenario.js';
import type { ChaosWorld } from './world.js';
import { worldOnServer } from './world-per-file.js';

/**
 * Schedules with real `sonar backend` processes and real signals, in secure mode: the test
 * creates schedules as an operator (through the API), the backends fire them and submit
 * their runs with the backend credential. No workers: the runs stay Running (`overlap:
 * allow`, so that each due time submits one).
 */
const chaos = worldOnServer();

const template = { steps: [{ id: 's1', tags: ['nowhere'], tasks: [{ id: 't1' }] }] };

type Fire = ScheduleFired['data'];

function tools(w: ChaosWorld) {
  const api = new ApiClient(w.nc, w.n);
  const store = new EventStore(w.nc, w.n);
  return {
    create: (req: Omit<RequestOf<'schedule.create'>, 'run'>) =>
      api.request('schedule.create', { run: template, overlap: 'allow', ...req }),
    fires: async (name: string): Promise<Fire[]> =>
      (await store.readAggregate(w.n.subjects.schedule(name)))
        .filter((r) => r.type === 'ScheduleFired')
        .map((r) => r.data as Fire),
    /** Whether the run's `RunSubmitted` is stored: the run was submitted whole. */
    submitted: async (runId: string): Promise<boolean> =>
      (await store.readAggregate(w.n.subjects.run(runId))).some((r) => r.type === 'RunSubmitted'),
  };
}

/** The live backend holding the reconciler lock. */
async function leaderOf(w: ChaosWorld) {
  return eventually(
    async () => {
      const id = await w.leader();
      return w.backends.find((b) => b.nodeId === id && b.proc.running) ?? false;
    },
    { timeoutMs: 30_000, intervalMs: 100, message: 'a live leader' },
  );
}

describe('chaos: schedules across backends', () => {
  it('a schedule every 2 s fires exactly once per due time while the leader is SIGKILLed twice', async () => {
    const w = await chaos.world();
    const t = tools(w);
    await w.startBackends(2);
    await t.create({ name: 'every2s', everyMs: 2000 });
    const waitFires = (n: number) =>
      eventually(
        async () => {
          const f = await t.fires('every2s');
          return f.length >= n && f;
        },
        { timeoutMs: 60_000, intervalMs: 200, message: `${n} fires` },
      );
    let seen = (await waitFires(2)).length;
    const kills: number[] = [];
    for (let round = 0; round < 2; round++) {
      const leader = await leaderOf(w);
      kills.push(Date.now());
      await leader.proc.kill('SIGKILL');
      // Its replacement is the next standby; the survivor leads once the lock frees.
      await w.startBackend();
      seen = (await waitFires(seen + 3)).length;
    }
    const fires = await t.fires('every2s');
    const due = fires.map((f) => Date.parse(f.dueAt));
    // Every due time from the first to the last, each once: none twice, none skipped.
    for (let i = 1; i < due.length; i++) expect(due[i]! - due[i - 1]!).toBe(2000);
    expect(new Set(fires.map((f) => f.runId)).size).toBe(fires.length);
    for (const f of fires) {
      expect(f).toMatchObject({ trigger: 'due', missed: 0 });
      expect(f.skipped).toBeUndefined();
      expect(f.runId).toBe(scheduledRunId('every2s', Date.parse(f.dueAt)));
    }
    // Both kills fell inside the fired span, and every fired run was submitted whole (one
    // killed between its fire and its submit is finished by the next leader).
    expect(due[0]!).toBeLessThan(kills[0]!);
    expect(due.at(-1)!).toBeGreaterThan(kills[1]!);
    await eventually(
      async () => (await Promise.all(fires.map((f) => t.submitted(f.runId)))).every(Boolean),
      { timeoutMs: 20_000, intervalMs: 500, message: 'every fired run submitted' },
    );
    if (process.env['SONAR_CHAOS_SAVE'] === '1') {
      await saveScenario('schedule-failover', await w.exportLog());
    }
    await w.stop();
  });

  it('after the whole fleet was down, each schedule catches up as its policy says', async () => {
    const w = await chaos.world();
    const t = tools(w);
    await w.startBackend();
    const policies = { 'cu-none': 'none', 'cu-last': 'last', 'cu-all': 'all' } as const;
    for (const [name, catchUp] of Object.entries(policies)) {
      await t.create({ name, everyMs: 1000, missedAfterMs: 2000, catchUp, catchUpLimit: 3 });
    }
    await eventually(
      async () => {
        for (const name of Object.keys(policies))
          if ((await t.fires(name)).length < 1) return false;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 200, message: 'a fire of each' },
    );
    for (const b of w.backends) await b.proc.kill('SIGKILL');
    const downAt = Date.now();
    const before = Object.fromEntries(
      await Promise.all(Object.keys(policies).map(async (n) => [n, (await t.fires(n)).length])),
    ) as Record<string, number>;
    // The downtime itself: several due times pass with no backend at all.
    await delay(7_000);
    await w.startBackend();
    const after = async (name: string): Promise<Fire[]> =>
      eventually(
        async () => {
          const f = (await t.fires(name)).slice(before[name]);
          return f.some((x) => x.trigger === 'due') && f;
        },
        { timeoutMs: 30_000, intervalMs: 200, message: `${name} fires again` },
      );

    const none = await after('cu-none');
    expect(none[0]).toMatchObject({ trigger: 'catch-up', skipped: 'catch-up' });
    expect(none[0]!.missed).toBeGreaterThanOrEqual(4);
    expect(none.filter((f) => f.trigger === 'catch-up')).toHaveLength(1);

    const last = await after('cu-last');
    expect(last[0]).toMatchObject({ trigger: 'catch-up' });
    expect(last[0]!.skipped).toBeUndefined();
    expect(last[0]!.missed).toBeGreaterThanOrEqual(4);
    expect(last.filter((f) => f.trigger === 'catch-up')).toHaveLength(1);

    const all = await after('cu-all');
    const caught = all.filter((f) => f.trigger === 'catch-up');
    expect(caught).toHaveLength(3);
    expect(caught[0]!.missed).toBeGreaterThanOrEqual(2);
    expect(caught.slice(1).every((f) => f.missed === 0 && f.skipped === undefined)).toBe(true);
    const caughtDue = caught.map((f) => Date.parse(f.dueAt));
    expect(caughtDue[1]! - caughtDue[0]!).toBe(1000);
    expect(caughtDue[2]! - caughtDue[1]!).toBe(1000);

    for (const fires of [none, last, all]) {
      // The missed due times all came while the fleet was down, and nothing is fired twice.
      const due = fires.map((f) => Date.parse(f.dueAt));
      expect(due[0]!).toBeGreaterThan(downAt - 2000);
      for (let i = 1; i < due.length; i++) expect(due[i]!).toBeGreaterThan(due[i - 1]!);
      // After the catch-up, every due time again.
      const due2 = fires.filter((f) => f.trigger === 'due').map((f) => Date.parse(f.dueAt));
      for (let i = 1; i < due2.length; i++) expect(due2[i]! - due2[i - 1]!).toBe(1000);
    }
    const ran = [last[0]!, ...caught].map((f) => f.runId);
    await eventually(
      async () => (await Promise.all(ran.map((r) => t.submitted(r)))).every(Boolean),
      {
        timeoutMs: 20_000,
        intervalMs: 500,
        message: 'the caught-up runs submitted',
      },
    );
    expect(await t.submitted(none[0]!.runId)).toBe(false);
  });
});
