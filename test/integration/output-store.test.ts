import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import type { S3Config } from '../../src/config.js';
import { createOutputStore } from '../../src/storage/create-output-store.js';
import { outputKey } from '../../src/storage/output-store.js';
import type { OutputStore } from '../../src/storage/output-store.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { freshTopology } from '../helpers/topology.js';

const nats = serverPerFile();
let s3rver: S3rver;
let s3Dir: string;
let s3: S3Config;

beforeAll(async () => {
  s3Dir = await mkdtemp(join(tmpdir(), 'sonar-s3-'));
  s3rver = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: s3Dir });
  const { port } = await s3rver.run();
  s3 = {
    endpoint: `http://127.0.0.1:${port}`,
    bucket: 'sonar-outputs',
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
  };
});

afterAll(async () => {
  await s3rver?.close();
  await rm(s3Dir, { recursive: true, force: true });
});

const MAX = 4 * 1024 * 1024;
const bytes = (n: number, seed = 7): Uint8Array => {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};

/** The one suite every output store must pass (DESIGN.md section 6). */
function conformance(name: string, open: () => Promise<OutputStore>): void {
  describe(`${name} output store`, () => {
    let store: OutputStore;
    beforeAll(async () => {
      store = await open();
    });

    it('gives back what was put, under the ref it returned', async () => {
      const key = outputKey('r1', 't1', 'a1');
      const ref = await store.put(key, bytes(100));
      expect(typeof ref).toBe('string');
      expect(await store.get(ref)).toEqual(bytes(100));
    });

    it('round-trips a large output (1 MiB) and an empty one', async () => {
      const big = await store.put(outputKey('r1', 't2', 'a1'), bytes(1024 * 1024, 3));
      const got = await store.get(big);
      // Buffer.equals, not toEqual: a deep compare of 1 MiB takes seconds.
      expect(got && Buffer.from(got).equals(bytes(1024 * 1024, 3))).toBe(true);
      const empty = await store.put(outputKey('r1', 't3', 'a1'), new Uint8Array());
      expect((await store.get(empty))?.byteLength).toBe(0);
    });

    it('answers null for a ref it does not hold', async () => {
      expect(await store.get(outputKey('r1', 'missing', 'a1'))).toBeNull();
    });

    it('overwrites a key put twice (a retried upload)', async () => {
      const key = outputKey('r1', 't4', 'a1');
      await store.put(key, bytes(10, 1));
      const ref = await store.put(key, bytes(20, 2));
      expect(await store.get(ref)).toEqual(bytes(20, 2));
    });

    it('deletes, and deleting what is not there is no error', async () => {
      const ref = await store.put(outputKey('r1', 't5', 'a1'), bytes(10));
      await store.delete(ref);
      expect(await store.get(ref)).toBeNull();
      await expect(store.delete(ref)).resolves.toBeUndefined();
    });

    it('states an object size without reading it, and null for a missing one', async () => {
      const ref = await store.put(outputKey('r1', 't7', 'a1'), bytes(300_000));
      expect(await store.stat(ref)).toEqual({ size: 300_000 });
      expect(await store.stat(outputKey('r1', 'missing', 'a1'))).toBeNull();
    });

    it('reads an object in chunks (several for 1 MiB), and stops when aborted', async () => {
      const ref = await store.put(outputKey('r1', 't8', 'a1'), bytes(1024 * 1024, 5));
      const chunks: Uint8Array[] = [];
      for await (const c of store.read(ref, new AbortController().signal)) chunks.push(c);
      expect(chunks.length).toBeGreaterThan(1);
      expect(Buffer.concat(chunks).equals(bytes(1024 * 1024, 5))).toBe(true);
      const ac = new AbortController();
      const read = (async () => {
        for await (const _c of store.read(ref, ac.signal)) ac.abort(new Error('enough'));
      })();
      await expect(read).rejects.toThrow('enough');
      const missing = (async () => {
        for await (const _c of store.read(outputKey('r1', 'none', 'a1'), ac.signal));
      })();
      await expect(missing).rejects.toThrow();
    });

    it('leaves no consumer behind after reads', async () => {
      const ref = await store.put(outputKey('r1', 't9', 'a1'), bytes(300_000));
      const jsm = await jetstreamManager(nats.nc);
      /** Consumers on every object store stream (the client's own `get` leaves some). */
      const consumers = async () => {
        let count = 0;
        for await (const s of jsm.streams.list()) {
          if (s.config.name.startsWith('OBJ_')) count += s.state.consumer_count;
        }
        return count;
      };
      const before = await consumers();
      for (let i = 0; i < 3; i++) {
        for await (const _c of store.read(ref, new AbortController().signal));
      }
      expect(await consumers()).toBeLessThanOrEqual(before);
    });

    it('refuses an output over SONAR_MAX_OUTPUT before sending it', async () => {
      const err = await store
        .put(outputKey('r1', 't6', 'a1'), new Uint8Array(MAX + 1))
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as Error).message).toMatch(
        /'output' is 4194305 bytes, over SONAR_MAX_OUTPUT \(4MiB\)/,
      );
      expect(await store.get(outputKey('r1', 't6', 'a1'))).toBeNull();
    });
  });
}

conformance('nats', async () => {
  const n = await freshTopology(nats.nc);
  return createOutputStore(nats.nc, { prefix: n.prefix, maxOutputBytes: MAX });
});

conformance('s3 (s3rver)', async () => {
  const n = await freshTopology(nats.nc);
  return createOutputStore(nats.nc, { prefix: n.prefix, maxOutputBytes: MAX, s3 });
});

describe('createOutputStore', () => {
  it('uses the S3 bucket when s3 is set, and the object store otherwise', async () => {
    const n = await freshTopology(nats.nc);
    const viaS3 = await createOutputStore(nats.nc, { prefix: n.prefix, maxOutputBytes: MAX, s3 });
    const viaNats = await createOutputStore(nats.nc, { prefix: n.prefix, maxOutputBytes: MAX });
    const ref = await viaS3.put('r9/t9/a9', bytes(5));
    expect(await viaNats.get(ref)).toBeNull();
    expect(await viaS3.get(ref)).toEqual(bytes(5));
    const info = await (
      await jetstreamManager(nats.nc)
    ).streams.info(`OBJ_${n.objectStores.outputs}`);
    expect(info.state.messages).toBe(0);
  });
});
