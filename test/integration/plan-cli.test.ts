import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  at,
  jsonl,
  line,
  reconcilerElected,
  runSubmitted,
  stepCreated,
  subject,
  taskCreated,
  taskPublished,
  taskStarted,
  workerJoined,
} from '../helpers/event-builders.js';
import { entry } from '../helpers/reconciler-world.js';
import { SONAR_BIN } from '../helpers/worker-fixtures.js';

const run = promisify(execFile);
let dir: string;

/** `sonar plan` with the given arguments; resolves with stdout, stderr and the exit code. */
async function sonarPlan(...args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, [SONAR_BIN, 'plan', ...args]);
    return { stdout, stderr, code: 0 };
  } catch (err: unknown) {
    const e = err as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

/** `sonar plan` of this file's events.jsonl, with the registry in `live` (a file in it) at `now`. */
const planOf = (live: string, now: string, ...flags: string[]) =>
  sonarPlan(join(dir, 'events.jsonl'), '--live', join(dir, live), '--now', now, ...flags);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sonar-plan-'));
  // r1.s1: t0 Running on w-gone (no key), t1 Published 11 min ago, t2 and t3 Pending.
  const events = [
    line(1, subject.worker('w-gone'), workerJoined({ workerId: 'w-gone' })),
    line(2, subject.step('r1', 's1'), stepCreated({ taskCount: 4 })),
    ...[0, 1, 2, 3].map((i) =>
      line(3 + i, subject.task('r1', `t${i}`), taskCreated({ taskId: `t${i}` })),
    ),
    line(7, subject.run('r1'), runSubmitted({ taskCount: 4 })),
    line(8, subject.task('r1', 't0'), taskPublished({ attemptId: 'a0' })),
    line(9, subject.task('r1', 't0'), taskStarted({ attemptId: 'a0', workerId: 'w-gone' })),
    line(10, subject.task('r1', 't1'), taskPublished({ attemptId: 'a1' })),
  ];
  await writeFile(join(dir, 'events.jsonl'), `${jsonl(events).join('\n')}\n`);
  await writeFile(
    join(dir, 'live.json'),
    JSON.stringify([entry('w1', { slots: 3, pulseAt: at(11 * 60), running: [] })]),
  );
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('sonar plan', () => {
  it('prints the decisions as JSON in the DESIGN.md section 8 format', async () => {
    const { stdout, code } = await planOf('live.json', at(11 * 60), '--json');
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual({
      requeue: [
        { task: 'r1.t1', reason: 'publish-timeout' },
        { task: 'r1.t0', reason: 'worker-lost' },
      ],
      dead: [],
      publish: [
        { task: 'r1.t0', tag: 'linux' },
        { task: 'r1.t1', tag: 'linux' },
        { task: 'r1.t2', tag: 'linux' },
      ],
      starved: [],
      capacity: { global: 3, tags: { linux: 3 }, steps: {} },
    });
  });

  it('takes every default as a flag, and prints a summary without --json', async () => {
    const { stdout, code } = await planOf(
      'live.json',
      at(11 * 60),
      '--publish-timeout',
      '1h',
      '--orphan-age',
      '1h',
      '--recovery-limit',
      '1',
      '--recovery-window',
      '72h',
      '--capacity-multiplier',
      '0.5',
      '--batch',
      '1',
      '--pulse-ttl',
      '15s',
    );
    expect(code).toBe(0);
    expect(stdout).toContain('capacity: global 0; tags linux 0; steps none');
    expect(stdout).toContain('requeue: none');
    expect(stdout).toContain('publish: none');
  });

  it('--tag-rates limits a tag and prints rateLimited; a bad rate is refused naming it', async () => {
    const { stdout, code } = await planOf(
      'live.json',
      at(11 * 60),
      '--json',
      '--tag-rates',
      'linux=1/s',
    );
    expect(code).toBe(0);
    const d = JSON.parse(stdout) as { publish: unknown[]; rateLimited: unknown };
    expect(d.publish).toEqual([{ task: 'r1.t0', tag: 'linux' }]);
    expect(d.rateLimited).toEqual({ linux: { rate: '1/s', left: 1 } });
    const text = await planOf('live.json', at(11 * 60), '--tag-rates', 'linux=1/s');
    expect(text.stdout).toContain('rate-limited tags (1):\n  linux  1/s  1 left');
    const bad = await planOf('live.json', at(0), '--tag-rates', 'linux=abc');
    expect(bad).toMatchObject({
      code: 2,
      stderr:
        'sonar: --tag-rates: "linux=abc" is not a rate: count/period (e.g. api=20/s, 1/m, 0.5/s, 40/2s)\n',
    });
  });

  it("takes the rates the log's last leader announced, unless --tag-rates says otherwise", async () => {
    const log = join(dir, 'elected.jsonl');
    const events = `${jsonl([
      line(
        11,
        subject.system('reconciler'),
        reconcilerElected({ nodeId: 'b1', tagRates: 'linux=2/m' }),
      ),
    ]).join('\n')}\n`;
    await writeFile(log, (await readFile(join(dir, 'events.jsonl'), 'utf8')) + events);
    const plan = (...flags: string[]) =>
      sonarPlan(log, '--live', join(dir, 'live.json'), '--now', at(11 * 60), '--json', ...flags);
    const announced = await plan();
    expect(announced.stderr).toContain('note: the rates the last leader announced: linux=2/m');
    expect(JSON.parse(announced.stdout)).toMatchObject({
      rateLimited: { linux: { rate: '2/m', left: 2 } },
    });
    expect((JSON.parse(announced.stdout) as { publish: unknown[] }).publish).toHaveLength(2);
    const none = await plan('--tag-rates', '');
    expect('rateLimited' in (JSON.parse(none.stdout) as object)).toBe(false);
    expect((JSON.parse(none.stdout) as { publish: unknown[] }).publish).toHaveLength(3);
  });

  it('refuses a bad flag or a bad live.json with exit 2', async () => {
    const bad = await planOf('live.json', 'soon');
    expect(bad).toMatchObject({
      code: 2,
      stderr: 'sonar: --now: "soon" is not an ISO-8601 time\n',
    });
    await writeFile(join(dir, 'bad.json'), '[{"workerId":"w1"}]');
    const live = await planOf('bad.json', at(0));
    expect(live.code).toBe(2);
    expect(live.stderr).toMatch(/is not an array of registry entries: '0.host'/);
  });
});
