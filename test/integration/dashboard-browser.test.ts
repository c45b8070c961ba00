/**
 * End-to-end: the dashboard in Debian's Chromium, driven by playwright-core, against an
 * in-process backend (reconciler, finalizers, HTTP) and real worker processes. One browser,
 * one backend and the tests in order, to stay light on a shared 2-core machine.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentFinalizeError } from '../../src/backend/finalize/finalize-job.js';
import { SonarClient } from '../../src/client/client.js';
import type { ResultsSink } from '../../src/storage/results-sink.js';
import { ensureChromium, launchChromium } from '../helpers/chromium.js';
import { startDashboardBackend } from '../helpers/dashboard-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { ROOT, killWorkers, spawnWorker } from '../helpers/worker-fixtures.js';

const ARTIFACTS = join(ROOT, 'test', 'artifacts');
const UI_TIMEOUT = 30_000;

let skipReason: string | null = null;
const nats = serverPerFile();
let b: TestBackend;
let client: SonarClient;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

/** The results database refuses `p*` tasks while broken: their finalization is poisoned. */
let broken = true;
const sink: ResultsSink = {
  upsert: (record) => {
    if (broken && record.taskId.startsWith('p')) {
      return Promise.reject(
        new PermanentFinalizeError(`results database refused ${record.taskId}: <b>disk full</b>`),
      );
    }
    return Promise.resolve('written');
  },
};

beforeAll(async () => {
  const chromium = ensureChromium();
  if (!chromium.ok) {
    skipReason = chromium.reason;
    console.warn(`dashboard browser tests skipped: ${chromium.reason}`);
    return;
  }
  await mkdir(ARTIFACTS, { recursive: true });
  b = await startDashboardBackend(nats.server.url, nats.nc, {
    reconciler: true,
    finalizer: { sink },
  });
  client = new SonarClient(nats.nc, { prefix: b.ctx.names.prefix });
  browser = await launchChromium(chromium.path);
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
  });
}, 900_000);

afterAll(async () => {
  await browser?.close();
  await killWorkers();
  await b?.stop();
});

const worker = (id: string, tags: string) =>
  spawnWorker(b.env, [
    '--worker-id',
    id,
    '--tags',
    tags,
    '--slots',
    '2',
    '--',
    'sh',
    '-c',
    'sleep 0.3; cat',
  ]);

const joined = (id: string) =>
  eventually(() => b.ctx.loop.projection.workers.get(id)?.snapshot.value === 'Active', {
    timeoutMs: UI_TIMEOUT,
    message: `worker ${id} joined`,
  });

/** Clicks an action button, then the confirmation dialog's Confirm (with a reason). */
async function confirmAction(selector: string, reason?: string): Promise<void> {
  await page.locator(selector).click();
  await page.locator('#confirm').waitFor({ state: 'visible' });
  if (reason !== undefined) await page.locator('#confirm-reason').fill(reason);
  await page.locator('#confirm-yes').click();
}

describe('dashboard in a browser', () => {
  it('overview shows a worker joining, then a SIGKILLed one going away', async (ctx) => {
    ctx.skip(skipReason !== null, skipReason ?? '');
    await page.goto(`${b.url}/`);
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT });
    const row = page.locator('tr[data-worker="w1"]');
    expect(await row.count()).toBe(0);

    const w1 = worker('w1', 'linux');
    await row.waitFor({ timeout: UI_TIMEOUT }); // no reload: the SSE stream brought it
    await expect.poll(() => row.textContent(), { timeout: UI_TIMEOUT }).toContain('linux');
    await expect
      .poll(() => row.locator('[data-pulse-at]').count(), { timeout: UI_TIMEOUT })
      .toBe(1);

    w1.child.kill('SIGKILL');
    await row.waitFor({ state: 'detached', timeout: UI_TIMEOUT });
    expect(b.ctx.loop.projection.workers.get('w1')?.snapshot.value).toBe('Lost');
  });

  it("a run's progress moves to Succeeded on its page", async (ctx) => {
    ctx.skip(skipReason !== null, skipReason ?? '');
    // No worker serves `build` yet: the run waits, starved, with the page open.
    await client.submit({
      runId: 'build',
      steps: [
        {
          id: 'compile',
          tags: ['build'],
          tasks: [1, 2, 3].map((i) => ({ id: `c${i}`, input: { i } })),
        },
        {
          id: 'test',
          tags: ['build'],
          after: ['compile'],
          tasks: [
            { id: 't1', input: {} },
            { id: 't2', input: {} },
          ],
        },
      ],
    });
    await page.goto(`${b.url}/runs/build`);
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT });
    expect(await page.locator('#run-state').textContent()).toContain('Running');
    expect(await page.locator('#run-progress').textContent()).toContain('0/5');
    expect(await page.locator('#dag [data-step]').count()).toBe(2);

    worker('w2', 'linux,build');
    await joined('w2');
    await expect
      .poll(() => page.locator('#run-state').textContent(), { timeout: UI_TIMEOUT })
      .toContain('Succeeded');
    expect(await page.locator('#run-progress').textContent()).toContain('5/5 (100%)');
    expect(await page.locator('#dag .node.st-Succeeded').count()).toBe(2);
    await page.screenshot({ path: join(ARTIFACTS, 'run.png'), fullPage: true });
  });

  it('a poisoned task is retried from the Poisoned page', async (ctx) => {
    ctx.skip(skipReason !== null, skipReason ?? '');
    await client.submit({
      runId: 'pz',
      steps: [{ id: 's', tags: ['linux'], tasks: [{ id: 'p1', input: { x: 1 } }] }],
    });
    await eventually(
      () => b.ctx.loop.projection.tasks.get('pz.p1')?.snapshot.value === 'Poisoned',
      {
        timeoutMs: UI_TIMEOUT,
      },
    );
    await page.goto(`${b.url}/poisoned`);
    const section = page.locator('section[data-task="pz.p1"]');
    await section.waitFor({ timeout: UI_TIMEOUT });
    // Escaped: the markup in the error shows as text, it is not rendered.
    expect(await section.locator('pre.error').textContent()).toContain('<b>disk full</b>');
    expect(await section.locator('b', { hasText: 'disk full' }).count()).toBe(0);

    broken = false; // the operator fixed the database
    await confirmAction('section[data-task="pz.p1"] button:has-text("Retry")');
    await expect.poll(() => page.locator('#flash').textContent()).toContain('retried pz.p1');
    await page.locator('#no-poisoned').waitFor({ timeout: UI_TIMEOUT });
    await page.locator('#nav-poisoned').waitFor({ state: 'detached', timeout: UI_TIMEOUT });
    await eventually(
      () => b.ctx.loop.projection.tasks.get('pz.p1')?.snapshot.value === 'Succeeded',
      {
        timeoutMs: UI_TIMEOUT,
      },
    );
    await page.goto(`${b.url}/tasks/pz/p1`);
    const history = await page.locator('#history').textContent();
    expect(history).toContain('TaskFinalizeRetried');
    expect(history).toContain('TaskFinalized');
  });

  it('cancels a run behind a confirmation', async (ctx) => {
    ctx.skip(skipReason !== null, skipReason ?? '');
    await client.submit({
      runId: 'stuck',
      steps: [
        {
          id: 'gpu',
          tags: ['gpu'],
          tasks: [
            { id: 'g1', input: {} },
            { id: 'g2', input: {} },
          ],
        },
      ],
    });
    await page.goto(`${b.url}/`);
    await page.locator('#starved').waitFor({ timeout: UI_TIMEOUT }); // nobody serves `gpu`
    await page.locator('tr[data-worker="w2"]').waitFor({ timeout: UI_TIMEOUT });
    await page.screenshot({ path: join(ARTIFACTS, 'overview.png'), fullPage: true });

    await page.goto(`${b.url}/runs/stuck`);
    await page.locator('#cancel-run').click();
    await page.locator('#confirm').waitFor({ state: 'visible' });
    expect(await page.locator('#confirm-text').textContent()).toContain('Cancel run stuck?');
    await page.locator('#confirm-no').click(); // changed our mind: nothing happens
    await page.locator('#confirm').waitFor({ state: 'hidden' });
    expect(b.ctx.loop.projection.runs.get('stuck')?.snapshot.value).toBe('Running');

    await confirmAction('#cancel-run', 'no gpu workers today');
    await expect
      .poll(() => page.locator('#run-state').textContent(), { timeout: UI_TIMEOUT })
      .toContain('Cancelled');
    const run = b.ctx.loop.projection.runs.get('stuck')!.snapshot;
    expect(run.context.reason).toBe('no gpu workers today');
    expect(b.ctx.loop.projection.tasks.get('stuck.g1')?.snapshot.value).toBe('Cancelled');
    expect(pageErrors).toEqual([]);
  });

  it('the Events page tails live, holds new events while paused, and shows them on resume', async (ctx) => {
    ctx.skip(skipReason !== null, skipReason ?? '');
    await page.goto(`${b.url}/events`);
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT });
    const submitted = page.locator('#event-rows tr[data-type="RunSubmitted"]');
    const before = await submitted.count();

    // Markup in an event's data (a cancel reason) arrives as text: rows use textContent.
    await client.submit({
      runId: 'tail1',
      steps: [{ id: 's', tags: ['gpu'], tasks: [{ id: 'x', input: {} }] }],
    });
    await expect.poll(() => submitted.count(), { timeout: UI_TIMEOUT }).toBe(before + 1);
    await client.cancel('tail1', { reason: '<i>hi</i>' });
    await expect
      .poll(() => page.locator('#event-rows').textContent(), { timeout: UI_TIMEOUT })
      .toContain('<i>hi</i>');
    expect(await page.locator('#event-rows i', { hasText: 'hi' }).count()).toBe(0);

    // Every stored event on the page first (the cancel's last events may still be coming),
    // so that what arrives while paused is tail2's.
    const lastSeq = async () =>
      (await b.ctx.jsm.streams.info(b.ctx.names.streams.events)).state.last_seq;
    const shownSeq = async () =>
      Number(await page.locator('#event-rows tr').first().getAttribute('data-seq'));
    const settled = await lastSeq();
    await expect.poll(shownSeq, { timeout: UI_TIMEOUT }).toBe(settled);

    await page.locator('#pause').click();
    expect(await page.locator('#pause').textContent()).toBe('Resume');
    await client.submit({
      runId: 'tail2',
      steps: [{ id: 's', tags: ['gpu'], tasks: [{ id: 'y', input: {} }] }],
    });
    // Held, all of them: the count says so, and none is on the page.
    const added = (await lastSeq()) - settled;
    await expect
      .poll(async () => Number((await page.locator('#tail-status').textContent())?.split(' ')[0]), {
        timeout: UI_TIMEOUT,
      })
      .toBeGreaterThanOrEqual(added);
    expect(await page.locator('#tail-status').textContent()).toMatch(/^\d+ new while paused$/);
    expect(await submitted.count()).toBe(before + 1);
    expect(await shownSeq()).toBe(settled);

    await page.locator('#pause').click();
    expect(await submitted.count()).toBe(before + 2);
    expect(await page.locator('#tail-status').textContent()).toBe('');
    expect(pageErrors).toEqual([]);
  });
});
