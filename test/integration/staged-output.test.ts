/**
 * Staged outputs on a real nats-server: what a worker stages on its subject is moved into the
 * object store whole, checked against the result's size and the upload's digest; a retried
 * upload counts once; nothing staged is `none`; every staged message is gone after a move.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import { headers } from '@nats-io/transport-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { names } from '../../streams/names.js';
import { ensureTopology } from '../../streams/provision.js';
import { DEFAULT_TOPOLOGY_OPTIONS } from '../../streams/topology.js';
import { commitStagedOutput, stageOutput, UPLOAD_HEADER } from '../../src/storage/staged-output.js';
import type { StagingParts } from '../../src/storage/staged-output.js';
import { serverPerFile } from '../helpers/server-per-file.js';

const n = names('stg');
const nats = serverPerFile();
let jsm: JetStreamManager;
let outputs: ObjectStore;
let parts: StagingParts;

const bytesOf = (size: number, fill = 'y'): Uint8Array =>
  new TextEncoder().encode(fill.repeat(size));
const staged = async (): Promise<number> =>
  (await jsm.streams.info(n.streams.staging)).state.messages;

beforeAll(async () => {
  jsm = await jetstreamManager(nats.nc);
  await ensureTopology(jsm, n, DEFAULT_TOPOLOGY_OPTIONS);
  outputs = await new Objm(nats.nc).open(n.objectStores.outputs);
  parts = { js: jetstream(nats.nc), jsm, outputs, stream: n.streams.staging };
}, 30_000);

describe('staged outputs', () => {
  it('moves a staged output into the store whole and leaves nothing staged', async () => {
    const data = bytesOf(300_000);
    const subject = n.subjects.stage('w1', 'a1');
    await stageOutput(parts.js, subject, data);
    expect(await staged()).toBe(4); // three chunks and the marker
    expect(await commitStagedOutput(parts, subject, 'r/t/a1', data.byteLength)).toBe('committed');
    expect(await outputs.getBlob('r/t/a1')).toEqual(data);
    expect(await staged()).toBe(0);
    // A retried result finds nothing staged: the output is already moved.
    expect(await commitStagedOutput(parts, subject, 'r/t/a1', data.byteLength)).toBe('none');
  });

  it('takes the last upload when a worker staged the output twice', async () => {
    const subject = n.subjects.stage('w1', 'a2');
    await stageOutput(parts.js, subject, bytesOf(200_000, 'a'));
    // A partial upload, as from a worker that died mid-way, then a whole one.
    const h = headers();
    h.set(UPLOAD_HEADER, 'partial');
    await parts.js.publish(subject, bytesOf(1_000, 'p'), { headers: h });
    const data = bytesOf(150_000, 'b');
    await stageOutput(parts.js, subject, data);
    expect(await commitStagedOutput(parts, subject, 'r/t/a2', data.byteLength)).toBe('committed');
    expect(await outputs.getBlob('r/t/a2')).toEqual(data);
    expect(await staged()).toBe(0);
  });

  it('refuses a result whose size differs from what was staged, naming both', async () => {
    const subject = n.subjects.stage('w1', 'a3');
    await stageOutput(parts.js, subject, bytesOf(20_000));
    await expect(commitStagedOutput(parts, subject, 'r/t/a3', 30_000)).rejects.toThrow(
      /'output.bytes' is 30000 but the output staged on stg\.stage\.w1\.a3 is 20000/,
    );
    expect(await outputs.info('r/t/a3')).toBeNull();
  });

  it('refuses an upload that lost a chunk: its digest does not match', async () => {
    const subject = n.subjects.stage('w1', 'a4');
    await stageOutput(parts.js, subject, bytesOf(300_000));
    const first = await jsm.streams.getMessage(n.streams.staging, {
      next_by_subj: subject,
      seq: 0,
    } as never);
    await jsm.streams.deleteMessage(n.streams.staging, first!.seq);
    await expect(commitStagedOutput(parts, subject, 'r/t/a4', 300_000)).rejects.toThrow(
      /does not match its size and digest/,
    );
    expect((await outputs.info('r/t/a4'))?.deleted ?? true).toBe(true);
  });

  it('answers none when nothing was staged', async () => {
    expect(await commitStagedOutput(parts, n.subjects.stage('w9', 'a9'), 'r/t/a9', 1)).toBe('none');
  });
});
