import { describe, expect, it } from 'vitest';
import { isSonarError } from '../../actors/errors.js';
import { judgeDurability } from '../../src/backend/storage/durability-check.js';
import { loadConfig } from '../../src/config.js';
import type { DurabilityFacts } from '../../src/backend/storage/durability-check.js';

const streams = (replicas: number) =>
  ['SONAR_EVENTS', 'SONAR_DISPATCH', 'KV_sonar_workers'].map((name) => ({ name, replicas }));

const facts = (over: Partial<DurabilityFacts>): DurabilityFacts => ({
  serverVersion: '2.9.10',
  streams: streams(1),
  sync: null,
  ...over,
});

describe('judgeDurability', () => {
  describe('replicas', () => {
    it('a single server is only noted: there is nothing to replicate to', () => {
      const v = judgeDurability(facts({}), true);
      expect(v.refusals).toEqual([]);
      expect(v.warnings).toEqual([]);
      expect(v.notes.join()).toMatch(/single server/);
    });

    it('on a cluster, fewer than 3 replicas is a warning naming each stream', () => {
      const v = judgeDurability(facts({ cluster: 'sonar' }), false);
      expect(v.refusals).toEqual([]);
      expect(v.warnings).toHaveLength(1);
      expect(v.warnings[0]).toMatch(/cluster sonar, 3 stream\(s\) keep fewer than 3 replicas/);
      expect(v.warnings[0]).toMatch(/SONAR_EVENTS \(1\), SONAR_DISPATCH \(1\)/);
    });

    it('on a cluster with strict, it is a refusal', () => {
      const v = judgeDurability(facts({ cluster: 'sonar', streams: streams(2) }), true);
      expect(v.warnings).toEqual([]);
      expect(v.refusals[0]).toMatch(/SONAR_EVENTS \(2\)/);
    });

    it('3 replicas on a cluster pass, strict or not', () => {
      for (const strict of [false, true]) {
        const v = judgeDurability(facts({ cluster: 'sonar', streams: streams(3) }), strict);
        expect(v.refusals).toEqual([]);
        expect(v.warnings).toEqual([]);
      }
    });
  });

  describe('sync_interval', () => {
    const cluster = { cluster: 'sonar', streams: streams(3) };

    it('2.9 has no such setting: a note, never a warning', () => {
      const v = judgeDurability(facts({ ...cluster, serverVersion: '2.9.10' }), true);
      expect(v.warnings).toEqual([]);
      expect(v.notes.join()).toMatch(/no sync_interval setting/);
    });

    it('2.10+ unreadable (no system account): a warning, even with strict', () => {
      const v = judgeDurability(facts({ ...cluster, serverVersion: '2.12.1' }), true);
      expect(v.refusals).toEqual([]);
      expect(v.warnings[0]).toMatch(/cannot read sync_interval/);
    });

    it('2.10+ with a periodic sync: a warning, or a refusal with strict', () => {
      const periodic = facts({
        ...cluster,
        serverVersion: '2.10.22',
        sync: { always: false, intervalMs: 120_000 },
      });
      expect(judgeDurability(periodic, false).warnings[0]).toMatch(/120000 ms, not `always`/);
      expect(judgeDurability(periodic, true).refusals[0]).toMatch(/not `always`/);
    });

    it('2.10+ with `always`: nothing to say', () => {
      const v = judgeDurability(
        facts({ ...cluster, serverVersion: '2.11.0', sync: { always: true, intervalMs: null } }),
        true,
      );
      expect(v).toEqual({ warnings: [], refusals: [], notes: [] });
    });

    it('reads versions with a pre-release suffix', () => {
      const v = judgeDurability(facts({ ...cluster, serverVersion: '2.10.0-RC.3' }), false);
      expect(v.warnings[0]).toMatch(/cannot read sync_interval/);
    });
  });
});

describe('SONAR_STRICT_DURABILITY', () => {
  it('the flag wins over the environment', () => {
    expect(loadConfig({ SONAR_STRICT_DURABILITY: '0' }, { strictDurability: true })).toMatchObject({
      strictDurability: true,
    });
  });

  it('reads the usual boolean spellings', () => {
    for (const on of ['1', 'true', 'YES', ' on ']) {
      expect(loadConfig({ SONAR_STRICT_DURABILITY: on }).strictDurability).toBe(true);
    }
    for (const off of ['0', 'false', 'no', 'off']) {
      expect(loadConfig({ SONAR_STRICT_DURABILITY: off }).strictDurability).toBe(false);
    }
    expect(loadConfig({ SONAR_STRICT_DURABILITY: '' }).strictDurability).toBeUndefined();
    expect(loadConfig({}).strictDurability).toBeUndefined();
  });

  it('refuses anything else, naming the variable', () => {
    let err: unknown;
    try {
      loadConfig({ SONAR_STRICT_DURABILITY: 'maybe' });
    } catch (e: unknown) {
      err = e;
    }
    expect(isSonarError(err, 'validation')).toBe(true);
    expect((err as Error).message).toBe(
      'SONAR_STRICT_DURABILITY: "maybe" is not a boolean (1, true, 0 or false)',
    );
  });
});
