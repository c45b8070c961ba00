import { readFileSync } from 'node:fs';
import { describe, it, expect } from 'vitest';
import { resolvePlanConfig } from '../../actors/reconciler/config.js';
import type { PlanConfig } from '../../actors/reconciler/config.js';
import { plan } from '../../actors/reconciler/plan.js';
import { replay } from '../../actors/replay.js';
import {
  MAX_RATE_WINDOW_MS,
  RATE_HISTORY,
  nextTokenAt,
  parseTagRate,
  parseTagRates,
  tokensLeft,
} from '../../actors/reconciler/tag-rates.js';
import { statusText } from '../../src/cli/commands/status.js';
import { statusView } from '../../src/cli/status-view.js';
import { overviewMain } from '../../src/http/dashboard/pages/overview-page.js';
import { buildOverview } from '../../src/http/dashboard/views/overview-view.js';
import { at, reconcilerElected } from '../helpers/event-builders.js';
import { World, entry, ms } from '../helpers/reconciler-world.js';

const withRates = (rates: string, over: Partial<PlanConfig> = {}): PlanConfig =>
  resolvePlanConfig({ tagRates: parseTagRates(rates), ...over });
const published = (d: { publish: { task: string; tag: string }[] }): string[] =>
  d.publish.map((x) => `${x.task}>${x.tag}`);

/** One worker `w1` serving `api` (and `linux`) with plenty of slots, pulsing at `pulse` s. */
const fleet = (pulse: number, slots = 100, tags = ['api', 'linux']) => [
  entry('w1', { tags, slots, pulseAt: at(pulse) }),
];

/** Step `s1` of `n` tasks on `api`; the first `sent` of them published at `sentAt` s. */
function apiStep(n: number, sent = 0, sentAt = 10): World {
  const w = new World()
    .worker('w1', ['api', 'linux'], 100)
    .run('r1', [{ id: 's1', tasks: n, tags: ['api'] }]);
  for (let i = 0; i < sent; i++) w.publish(`r1.s1-${i}`, 'api', at(sentAt));
  return w;
}

describe('tag rates: syntax', () => {
  it.each([
    ['20/s', 20, 1_000],
    ['40/2s', 40, 2_000],
    ['1/m', 1, 60_000],
    ['0.5/s', 1, 2_000],
    ['2.5/s', 2, 800],
    ['5/500ms', 5, 500],
    ['3/h', 3, 3_600_000],
    ['0/s', 0, 1_000],
  ])('%s: a burst of %i in any %i ms', (text, burst, windowMs) => {
    expect(parseTagRate(text)).toEqual({ burst, windowMs, text });
  });

  it('refuses what is no rate, naming the item', () => {
    expect(() => parseTagRates('api=abc')).toThrow('"api=abc" is not a rate');
    expect(() => parseTagRates('api=20')).toThrow('"api=20" is not a rate');
    expect(() => parseTagRates('api=-1/s')).toThrow('"api=-1/s" is not a rate');
    expect(() => parseTagRates('api=1/0s')).toThrow('"api=1/0s" has a period of 0');
    expect(() => parseTagRates('a.b=1/s')).toThrow('"a.b=1/s" is not tag=rate');
    expect(() => parseTagRates(`api=${RATE_HISTORY + 1}/s`)).toThrow('more than the 10000');
    expect(() => parseTagRates('api=1/2h')).toThrow('longer than the 1h');
    expect(parseTagRates(`api=${RATE_HISTORY}/s, slow = 1/h ,`)).toEqual({
      api: { burst: RATE_HISTORY, windowMs: 1_000, text: `${RATE_HISTORY}/s` },
      slow: { burst: 1, windowMs: MAX_RATE_WINDOW_MS, text: '1/h' },
    });
  });

  it('nextTokenAt: when an empty bucket gets its next token back', () => {
    const rate = parseTagRate('2/s');
    expect(nextTokenAt([4_000, 4_500], rate, 4_999)).toBe(5_000);
    expect(nextTokenAt([4_000, 4_500], rate, 5_000)).toBeNull();
    expect(nextTokenAt([4_500], rate, 4_999)).toBeNull();
    expect(nextTokenAt(undefined, rate, 0)).toBeNull();
    expect(nextTokenAt([4_000], parseTagRate('0/s'), 4_000)).toBeNull();
  });

  it('tokensLeft counts the publishes in (now - window, now], and any after now', () => {
    const rate = parseTagRate('2/s');
    expect(tokensLeft(undefined, rate, 5_000)).toBe(2);
    expect(tokensLeft([4_000, 4_500], rate, 5_000)).toBe(1);
    expect(tokensLeft([4_000, 4_500], rate, 4_999)).toBe(0);
    expect(tokensLeft([4_000, 4_500], rate, 5_500)).toBe(2);
    expect(tokensLeft([6_000], rate, 5_000)).toBe(1);
  });
});

describe('plan: tag rate limits', () => {
  describe('the bucket at its boundary', () => {
    it('a tick places at most the burst', () => {
      const d = plan(apiStep(5).p, fleet(0), ms(0), withRates('api=3/s'));
      expect(published(d)).toEqual(['r1.s1-0>api', 'r1.s1-1>api', 'r1.s1-2>api']);
      expect(d.rateLimited).toEqual({ api: { rate: '3/s', left: 3 } });
    });

    it('a token is held until exactly one window after its publish', () => {
      const w = apiStep(4, 2, 10);
      const before = plan(w.p, fleet(11), ms(11) - 1, withRates('api=2/s'));
      expect(published(before)).toEqual([]);
      expect(before.rateLimited).toEqual({ api: { rate: '2/s', left: 0 } });
      const onTime = plan(w.p, fleet(11), ms(11), withRates('api=2/s'));
      expect(published(onTime)).toEqual(['r1.s1-2>api', 'r1.s1-3>api']);
      expect(onTime.rateLimited).toEqual({ api: { rate: '2/s', left: 2 } });
    });

    it('tokens come back one by one, as their publishes leave the window', () => {
      const w = apiStep(6);
      w.publish('r1.s1-0', 'api', at(0));
      w.publish('r1.s1-1', 'api', at(30));
      w.publish('r1.s1-2', 'api', at(59));
      const d = plan(w.p, fleet(60), ms(60), withRates('api=3/m'));
      expect(published(d)).toEqual(['r1.s1-3>api']);
      expect(d.rateLimited!['api']!.left).toBe(1);
    });

    it('a fractional rate: 0.5/s is one publish in any 2 s', () => {
      const w = apiStep(3, 1, 10);
      expect(published(plan(w.p, fleet(11), ms(12) - 1, withRates('api=0.5/s')))).toEqual([]);
      expect(published(plan(w.p, fleet(12), ms(12), withRates('api=0.5/s')))).toEqual([
        'r1.s1-1>api',
      ]);
    });

    it('a rate of 0 publishes nothing to the tag, and its steps are not starved', () => {
      const d = plan(apiStep(3).p, fleet(0), ms(0), withRates('api=0/s'));
      expect(d.publish).toEqual([]);
      expect(d.starved).toEqual([]);
      expect(d.rateLimited).toEqual({ api: { rate: '0/s', left: 0 } });
    });

    it('publishes to another tag do not count', () => {
      const w = apiStep(2);
      w.run('r2', [{ id: 'l', tasks: 1, tags: ['linux'] }]);
      w.publish('r2.l-0', 'linux', at(10));
      expect(published(plan(w.p, fleet(10), ms(10), withRates('api=2/s')))).toHaveLength(2);
    });
  });

  describe('with capacity', () => {
    it('tag capacity below the tokens binds, and the tokens are reported before placement', () => {
      const d = plan(apiStep(5).p, fleet(0, 2), ms(0), withRates('api=10/s'));
      expect(published(d)).toHaveLength(2);
      expect(d.capacity.tags['api']).toBe(2);
      expect(d.rateLimited).toEqual({ api: { rate: '10/s', left: 10 } });
    });

    it('global capacity binds across tags: what the limited tag leaves goes elsewhere', () => {
      const w = apiStep(5).run('r2', [{ id: 'l', tasks: 5, tags: ['linux'] }]);
      const d = plan(w.p, fleet(0, 3), ms(0), withRates('api=2/s'));
      expect(d.capacity).toMatchObject({ global: 3, tags: { api: 3, linux: 3 } });
      expect(published(d)).toEqual(['r1.s1-0>api', 'r1.s1-1>api', 'r2.l-0>linux']);
    });

    it("a step's maxConcurrent binds below the tokens", () => {
      const w = new World()
        .worker('w1', ['api'], 100)
        .run('r1', [{ id: 's1', tasks: 5, tags: ['api'], maxConcurrent: 1 }]);
      const d = plan(w.p, fleet(0, 100, ['api']), ms(0), withRates('api=10/s'));
      expect(published(d)).toEqual(['r1.s1-0>api']);
    });

    it('a task that may go to two tags goes to the one that can take more within its rate', () => {
      const w = new World()
        .worker('w1', ['api', 'spare'], 100)
        .run('r1', [{ id: 's1', tasks: 3, tags: ['api', 'spare'] }]);
      const live = [
        entry('w1', { tags: ['api'], slots: 10 }),
        entry('w2', { tags: ['spare'], slots: 2 }),
      ];
      // Without a rate, api (10 slots) takes all three.
      expect(published(plan(w.p, live, ms(0), resolvePlanConfig()))).toEqual([
        'r1.s1-0>api',
        'r1.s1-1>api',
        'r1.s1-2>api',
      ]);
      // With 1/s, api can take one: spare (2) ranks first, then api, then spare.
      expect(published(plan(w.p, live, ms(0), withRates('api=1/s')))).toEqual([
        'r1.s1-0>spare',
        'r1.s1-1>api',
        'r1.s1-2>spare',
      ]);
    });
  });

  describe('water-filling and priorities', () => {
    it('a step held by its rate does not hold back steps on other tags', () => {
      const w = apiStep(20, 2, 10).run('r2', [{ id: 'l', tasks: 3, tags: ['linux'] }]);
      const d = plan(w.p, fleet(10), ms(10), withRates('api=2/s'));
      expect(published(d)).toEqual(['r2.l-0>linux', 'r2.l-1>linux', 'r2.l-2>linux']);
    });

    it('a higher priority held by its rate lets a lower priority on another tag go', () => {
      const w = new World()
        .worker('w1', ['api', 'linux'], 100)
        .run('hi', [{ id: 's', tasks: 3, tags: ['api'], priority: 9 }])
        .run('lo', [{ id: 's', tasks: 2, tags: ['linux'], priority: 0 }]);
      const d = plan(w.p, fleet(0), ms(0), withRates('api=1/s'));
      expect(published(d)).toEqual(['hi.s-0>api', 'lo.s-0>linux', 'lo.s-1>linux']);
    });

    it('a delayed task takes no token', () => {
      const w = new World().worker('w1', ['api'], 100).run('r1', [
        {
          id: 's1',
          tasks: 3,
          tags: ['api'],
          taskOwn: (i) => (i === 0 ? { notBefore: at(60) } : {}),
        },
      ]);
      const d = plan(w.p, fleet(0), ms(0), withRates('api=2/s'));
      expect(published(d)).toEqual(['r1.s1-1>api', 'r1.s1-2>api']);
      expect(d.delayed).toEqual({ 'r1.s1': 1 });
    });
  });

  describe('starvation and recovery', () => {
    it('a step waiting only for its rate is not starved', () => {
      const d = plan(apiStep(5, 3, 10).p, fleet(10), ms(10), withRates('api=3/s'));
      expect(d.publish).toEqual([]);
      expect(d.starved).toEqual([]);
    });

    it('a rate-limited tag nobody serves is starved as before, and not reported', () => {
      const w = new World().run('r1', [{ id: 's1', tasks: 2, tags: ['api'] }]);
      const d = plan(w.p, [entry('w1', { tags: ['linux'] })], ms(0), withRates('api=5/s'));
      expect(d.starved).toEqual(['r1.s1']);
      expect('rateLimited' in d).toBe(false);
    });

    it('a republish after a requeue takes a token like any publish', () => {
      const w = apiStep(1, 1, 0);
      const config = withRates('api=1/m', { publishTimeoutMs: 10_000 });
      const early = plan(w.p, fleet(20), ms(20), config);
      expect(early.requeue).toEqual([{ task: 'r1.s1-0', reason: 'publish-timeout' }]);
      expect(early.publish).toEqual([]);
      const later = plan(w.p, fleet(60), ms(60), config);
      expect(later.requeue).toHaveLength(1);
      expect(published(later)).toEqual(['r1.s1-0>api']);
    });
  });

  describe('the contract', () => {
    it('without rates, or with rates only for tags nobody serves, no rateLimited field', () => {
      const w = apiStep(2);
      expect('rateLimited' in plan(w.p, fleet(0), ms(0), resolvePlanConfig())).toBe(false);
      expect('rateLimited' in plan(w.p, fleet(0), ms(0), withRates('gpu=1/s'))).toBe(false);
      expect(plan(w.p, fleet(0), ms(0), withRates(''))).toEqual(
        plan(w.p, fleet(0), ms(0), resolvePlanConfig()),
      );
    });

    it('rateLimited lists served rate-limited tags in name order', () => {
      const d = plan(apiStep(1).p, fleet(0), ms(0), withRates('linux=9/s,api=1/s,gpu=1/s'));
      expect(Object.keys(d.rateLimited!)).toEqual(['api', 'linux']);
    });
  });
});

describe('projection: publish times', () => {
  it('keeps them per tag, ascending, and at most RATE_HISTORY plus a little', () => {
    const w = new World()
      .worker('w1', ['api'], 100)
      .run('r1', [{ id: 's1', tasks: RATE_HISTORY + 1100, tags: ['api'] }]);
    for (let i = 0; i < RATE_HISTORY + 1100; i++) {
      w.publish(`r1.s1-${i}`, 'api', new Date(ms(0) + i).toISOString());
    }
    const times = w.p.publishTimes.get('api')!;
    expect(times.length).toBeLessThanOrEqual(RATE_HISTORY + 1024);
    expect(times.length).toBeGreaterThanOrEqual(RATE_HISTORY);
    expect(times.at(-1)).toBe(ms(0) + RATE_HISTORY + 1099);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it('forgets times more than the longest window behind the newest', () => {
    const w = new World()
      .worker('w1', ['api'], 100)
      .run('r1', [{ id: 's1', tasks: 3, tags: ['api'] }]);
    w.publish('r1.s1-0', 'api', at(0));
    w.publish('r1.s1-1', 'api', at(10));
    w.publish('r1.s1-2', 'api', at(2 * 3600));
    expect(w.p.publishTimes.get('api')).toEqual([ms(2 * 3600)]);
  });

  it('files a time that steps back in its place', () => {
    const w = new World()
      .worker('w1', ['api'], 100)
      .run('r1', [{ id: 's1', tasks: 3, tags: ['api'] }]);
    w.publish('r1.s1-0', 'api', at(5));
    w.publish('r1.s1-1', 'api', at(7));
    w.publish('r1.s1-2', 'api', at(6));
    expect(w.p.publishTimes.get('api')).toEqual([ms(5), ms(6), ms(7)]);
  });
});

describe('the rate-limits replay scenario', () => {
  const text = readFileSync(
    new URL('../replay/scenarios/rate-limits.jsonl', import.meta.url),
    'utf8',
  );
  const { projection } = replay(text.split('\n'));
  const live = [
    entry('w-1', { tags: ['api', 'linux'], slots: 8, pulseAt: '2026-06-01T08:00:06.000Z' }),
  ];
  const rates = parseTagRates(projection.leader!.tagRates!);
  const at06 = (msPast: number) => Date.parse('2026-06-01T08:00:06.000Z') + msPast;

  it('keeps the rates its leader announced, and the election that refused a bad value', () => {
    expect(projection.leader).toMatchObject({ nodeId: 'backend-a', tagRates: 'api=3/s,slow=1/m' });
    expect(projection.publishTimes.get('api')).toEqual([
      Date.parse('2026-06-01T08:00:05.000Z'),
      Date.parse('2026-06-01T08:00:05.400Z'),
      Date.parse('2026-06-01T08:00:05.800Z'),
    ]);
  });

  it('plans as sonar plan --json prints it: one api token at 06.000, two just before 06.800, three at it', () => {
    const config = resolvePlanConfig({ tagRates: rates });
    const d = plan(projection, live, at06(0), config);
    expect(published(d)).toEqual(['calls.f4>api', 'calls.l1>linux', 'calls.l2>linux']);
    expect(d.rateLimited).toEqual({ api: { rate: '3/s', left: 1 } });
    const later = plan(projection, live, at06(799), config);
    expect(published(later)).toEqual([
      'calls.f4>api',
      'calls.f5>api',
      'calls.l1>linux',
      'calls.l2>linux',
    ]);
    expect(plan(projection, live, at06(800), config).rateLimited!['api']!.left).toBe(3);
  });
});

describe('sonar status', () => {
  const view = (w: World, config: PlanConfig) =>
    statusView({
      projection: w.p,
      entries: fleet(10).map((e) => ({ ...e, running: [] })),
      now: ms(10),
      planConfig: config,
      finalizeQueue: 0,
      lockHolder: null,
    });

  it("shows the rate-limited tags by the leader's announced rates; nothing without any", () => {
    const w = apiStep(4, 2, 10);
    expect('rateLimited' in view(w, resolvePlanConfig())).toBe(false);
    w.add(
      'sonar.events.system.reconciler',
      reconcilerElected({ nodeId: 'b1', tagRates: 'api=3/s' }, at(1)),
    );
    const v = view(w, resolvePlanConfig());
    expect(v.rateLimited).toEqual({ api: { rate: '3/s', left: 1 } });
    expect(statusText(v, false)).toContain('rates     api 3/s (1 left)');
    // The CLI's own setting, when it has one, wins.
    expect(view(w, withRates('api=9/s')).rateLimited).toEqual({ api: { rate: '9/s', left: 7 } });
  });
});

describe('the dashboard overview', () => {
  const overview = (w: World) =>
    buildOverview({
      projection: w.p,
      registry: fleet(10).map((e) => ({ ...e, running: [] })),
      now: ms(10),
      pulseTtlMs: 15_000,
      capacityMultiplier: 1,
      finalizeQueue: null,
      lockHolder: null,
    });

  it("lists the served rate-limited tags by the leader's rates, with their tokens", () => {
    const w = apiStep(4, 2, 10);
    expect('rateLimited' in overview(w)).toBe(false);
    w.add(
      'sonar.events.system.reconciler',
      reconcilerElected({ nodeId: 'b1', tagRates: 'api=3/s,gpu=1/s' }, at(1)),
    );
    const v = overview(w);
    expect(v.rateLimited).toEqual([{ tag: 'api', rate: '3/s', left: 1 }]);
    expect(overviewMain(v).value).toMatch(/Rate limits:[\s\S]*api[\s\S]*3\/s \(1 left\)/);
  });
});
