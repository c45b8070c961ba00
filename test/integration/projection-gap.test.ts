/**
 * On nats-server 2.9 a purge filtered by subject moves every consumer of the stream past
 * the stream's end, so a live projection loop may be delivered past events appended while
 * retention purged. It must never go on silently without them: it checks every gap in what
 * it is delivered, and fails (the process then starts afresh from the snapshot) when a gap
 * holds stored events.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ProjectionLoop } from '../../src/backend/projection/projection-loop.js';
import { silentLogger } from '../../src/log.js';
import type { Logger } from '../../src/log.js';
import { eventually } from '../helpers/eventually.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { startTestBackend } from '../helpers/worker-fixtures.js';
import type { TestBackend } from '../helpers/test-backend.js';

const nats = serverPerFile();
let tb: TestBackend | undefined;

afterAll(async () => {
  await tb?.stop();
});

describe('a live projection loop and the gaps in what it is delivered', () => {
  it('finds the first stored event at or after a sequence, across holes', async () => {
    tb = await startTestBackend(nats.server.url, nats.nc);
    const { ctx } = tb;
    const jsm = await ctx.store.jsm();
    const subject = `${ctx.names.subjects.eventsAll.slice(0, -1)}probe.x`;
    const seqs: number[] = [];
    for (let i = 0; i < 5; i++) seqs.push((await ctx.js.publish(subject, 'junk')).seq);
    await jsm.streams.deleteMessage(ctx.names.streams.events, seqs[1]!);
    await jsm.streams.deleteMessage(ctx.names.streams.events, seqs[2]!);
    expect(await ctx.store.firstStoredFrom(seqs[1]!)).toBe(seqs[3]);
    expect(await ctx.store.firstStoredFrom(seqs[4]! + 1)).toBeNull();
    await tb.stop();
    tb = undefined;
  });

  it('never goes on silently without events appended while a filtered purge ran', async () => {
    tb = await startTestBackend(nats.server.url, nats.nc);
    const { ctx } = tb;
    const base = ctx.names.subjects.eventsAll.slice(0, -1);
    // A loop of its own, whose log tells which undecodable events it was delivered.
    let keptSeen = 0;
    const log: Logger = {
      ...silentLogger,
      warn: (msg, meta) => {
        if (msg === 'event skipped' && meta?.['subject'] === `${base}kept.x`) keptSeen++;
      },
      child: () => log,
    };
    const loop = new ProjectionLoop(ctx.store, log);
    await loop.start();
    try {
      const jsm = await ctx.store.jsm();
      let kept = 0;
      // Appends of `kept` while filtered purges take `old`: on 2.9 the loop's consumer is
      // moved past the stream's end by some of them.
      for (let round = 0; round < 10; round++) {
        for (let i = 0; i < 200; i++) ctx.js.publish(`${base}old.x`, 'junk').catch(() => {});
        const appends: Promise<unknown>[] = [];
        for (let i = 0; i < 300; i++) {
          appends.push(ctx.js.publish(`${base}kept.x`, 'junk').then(() => kept++));
          if (i === 150) {
            appends.push(jsm.streams.purge(ctx.names.streams.events, { filter: `${base}old.x` }));
          }
        }
        await Promise.all(appends);
      }
      await eventually(() => loop.stoppedWith !== null || keptSeen === kept, {
        timeoutMs: 30_000,
        message: 'the loop has every kept event, or has failed',
      });
      console.log(
        loop.stoppedWith === null
          ? `the loop was delivered all ${kept} kept events`
          : `the loop found a skip and failed: ${loop.stoppedWith.message}`,
      );
      if (loop.stoppedWith !== null) {
        expect(loop.stoppedWith.message).toMatch(/delivered past stored events/);
      } else {
        expect(keptSeen).toBe(kept);
      }
    } finally {
      await loop.stop();
    }
  }, 60_000);
});
