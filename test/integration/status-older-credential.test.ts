/**
 * A reader whose credential predates snapshot reads (made by an older `sonar creds init`):
 * `sonar status` still answers from the event stream alone and says on stderr what it missed,
 * instead of failing. The server's users stand in for the two credentials: the backend and
 * the helpers connect as the unrestricted default user, the CLI as `older`, which may not
 * read the snapshots' object stream.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { StatusView } from '../../src/cli/status-view.js';
import { names } from '../../streams/names.js';
import { finishedRun } from '../helpers/finished-run.js';
import { snapshotNow } from '../helpers/snapshot-now.js';
import { startNatsServer } from '../helpers/nats-server.js';
import type { NatsServer } from '../helpers/nats-server.js';
import { serverPerFile } from '../helpers/server-per-file.js';
import { runSonar } from '../helpers/sonar-process.js';
import { sweepWorldsPerTest } from '../helpers/sweep-world.js';

async function serverWithOlderReader(): Promise<NatsServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sonar-older-reader-'));
  const config = join(dir, 'nats.conf');
  // Only the snapshot reads are withheld: everything else a reader did before still works.
  await writeFile(
    config,
    `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }
authorization {
  users = [
    { user: admin, password: admin }
    { user: older, password: older, permissions: { publish: { allow: ">", deny: [
      "$JS.API.STREAM.MSG.GET.${SNAPSHOTS}", "$JS.API.DIRECT.GET.${SNAPSHOTS}.>",
      "$JS.API.CONSUMER.CREATE.${SNAPSHOTS}.>"
    ] } } }
  ]
}
no_auth_user: admin
`,
  );
  const server = await startNatsServer({ config, storeDir: join(dir, 'js') });
  // A given store dir is the caller's to remove: with the config beside it, after the server.
  const stop = server.stop.bind(server);
  server.stop = async () => {
    await stop();
    await rm(dir, { recursive: true, force: true });
  };
  return server;
}

const PREFIX = 'older';
const SNAPSHOTS = `OBJ_${names(PREFIX).objectStores.snapshots}`;

const nats = serverPerFile({ start: serverWithOlderReader });
const world = sweepWorldsPerTest(nats);

it('status with a credential that cannot read the snapshot folds the stream and says so', async () => {
  const w = await world({ prefix: PREFIX });
  await finishedRun(w, 'done', 2);
  expect(await snapshotNow(w)).not.toBeNull();

  const out = await runSonar(
    'status',
    ['status', '--all', '--json', '--server', nats.server.url, '--prefix', w.ctx.names.prefix],
    { SONAR_NATS_USER: 'older', SONAR_NATS_PASSWORD: 'older' },
  );
  expect(out.code, out.stderr).toBe(0);
  expect((JSON.parse(out.stdout) as StatusView).runs['done']).toMatchObject({
    state: 'Succeeded',
    tasks: { Succeeded: 2 },
  });
  expect(out.stderr).toMatch(/sonar: warning: could not read the projection snapshot \(.+\)/);
  expect(out.stderr).toContain('a credential made by an older `sonar creds init` lacks this read');
});
