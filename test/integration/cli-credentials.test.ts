/**
 * SONAR_NATS_CREDS and SONAR_NATS_USER/PASSWORD work from every networked CLI verb:
 * a server that refuses anonymous clients, and each verb run once with a creds file and once
 * with a user and password. Long-running verbs (backend, worker, workers, tail) count once
 * they show they are connected.
 *
 * The creds file holds a real user nkey seed and a placeholder JWT: this server authenticates
 * nkey users (signature of the server's nonce), as an operator-mode server would after
 * checking the JWT, so what is under test is Sonar reading the file and signing with it.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createUser } from '@nats-io/nkeys';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startNatsServer } from '../helpers/nats-server.js';
import { perFile } from '../helpers/per-file.js';
import { inTempRoot } from '../helpers/temp-root.js';
import { killAll, runSonar, spawnSonar } from '../helpers/sonar-process.js';
import { NO_IMDS } from '../helpers/worker-fixtures.js';

const PASSWORD = 'cli-test-password';

type Auth = 'creds' | 'password';
const AUTHS: Auth[] = ['creds', 'password'];

const envOf = (auth: Auth | 'none'): Record<string, string> => ({
  SONAR_NATS_URL: authServer().server.url,
  SONAR_IMDS_URL: NO_IMDS,
  SONAR_PULSE_INTERVAL: '300ms',
  SONAR_PULSE_TTL: '1500ms',
  SONAR_TICK: '200ms',
  SONAR_LOCK_TTL: '1s',
  SONAR_DRAIN_GRACE: '1s',
  ...(auth === 'creds' && { SONAR_NATS_CREDS: authServer().credsFile }),
  ...(auth === 'password' && { SONAR_NATS_USER: 'sonar', SONAR_NATS_PASSWORD: PASSWORD }),
});

/**
 * A server that refuses anonymous clients, with a creds file (`credsFile`) and a password it
 * accepts, and a run file in `dir`.
 */
const startAuthServer = () =>
  inTempRoot('sonar-creds', async (dir) => {
    const user = createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    const credsFile = join(dir, 'user.creds');
    await writeFile(
      credsFile,
      [
        '-----BEGIN NATS USER JWT-----',
        'eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.c2ln',
        '------END NATS USER JWT------',
        '',
        '-----BEGIN USER NKEY SEED-----',
        seed,
        '------END USER NKEY SEED------',
        '',
      ].join('\n'),
    );
    await mkdir(join(dir, 'js'));
    await writeFile(
      join(dir, 'server.conf'),
      [
        `jetstream { store_dir: ${JSON.stringify(join(dir, 'js'))} }`,
        'authorization { users: [',
        `  { nkey: ${user.getPublicKey()} }`,
        `  { user: sonar, password: ${JSON.stringify(PASSWORD)} }`,
        '] }',
        '',
      ].join('\n'),
    );
    const server = await startNatsServer({
      config: join(dir, 'server.conf'),
      storeDir: join(dir, 'js'),
    });
    await writeFile(
      join(dir, 'run.json'),
      JSON.stringify({ runId: 'cr', steps: [{ id: 's', tags: ['cr'], tasks: [{ id: 't' }] }] }),
    );
    return { server, dir, credsFile, stop: () => server.stop() };
  });

const authServer = perFile('authServer', startAuthServer, (a) => a.stop(), { timeoutMs: 60_000 });

afterAll(async () => {
  await killAll();
});

/** Starts a long-running verb and waits for `sign` in its output (it is connected). */
async function connects(auth: Auth, args: string[], sign: RegExp): Promise<void> {
  const p = spawnSonar(`${auth} ${args[0]}`, args, envOf(auth));
  await eventually(() => sign.test(p.stderr() + p.stdout()) || !p.running, {
    timeoutMs: 30_000,
    message: `${args.join(' ')} with ${auth} shows ${String(sign)}`,
  }).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${p.stderr().slice(-1_500)}\n${p.stdout().slice(-500)}`);
  });
  expect(p.running, `${args[0]} with ${auth}: ${p.stderr()}`).toBe(true);
  // A supervisor's workers run in their own process group: SIGKILL would orphan them, so it
  // gets SIGTERM, which it forwards to them (they drain and leave) before it exits.
  await p.kill(args[0] === 'workers' ? 'SIGTERM' : 'SIGKILL');
}

describe('credentials from every CLI verb', () => {
  it('without credentials the server refuses: one clear line, exit 1', async () => {
    const r = await runSonar('anon export', ['export'], envOf('none'));
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^sonar: cannot reach NATS at .*Authorization Violation$/);
  });

  it.each(AUTHS)('long-running verbs connect with %s', async (auth) => {
    await connects(auth, ['backend'], /backend started/);
    // A backend for the rest of this file (the first one provisions the topology).
    if (auth === 'creds') spawnSonar('creds backend (kept)', ['backend'], envOf('creds'));
    await connects(auth, ['worker', '--tags', 'cr', '--', 'cat'], /worker joined/);
    await connects(auth, ['workers', '--count', '1', '--tags', 'cr'], /worker joined/);
    await connects(auth, ['tail', '--since', '1h', '--json'], /"type":"WorkerJoined"/);
  });

  it.each(AUTHS)('one-shot verbs run with %s', async (auth) => {
    const run = async (args: string[]) => {
      const r = await runSonar(`${auth} ${args[0]}`, args, envOf(auth));
      expect(r.stderr, `${args.join(' ')} with ${auth}`).not.toMatch(/cannot reach NATS/);
      return r;
    };
    const submitted = await run(['submit', join(authServer().dir, 'run.json'), '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    for (const args of [
      ['export'],
      ['status', '--json'],
      ['results', 'cr', '--json'],
      ['poisoned', 'list', '--json'],
      ['sweep', '--json'],
    ]) {
      const r = await run(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
    }
    // Cancel and rerun answer from the backend (ok, or a refusal about the run's state):
    // either way the connection was made and the request was served.
    for (const args of [
      ['cancel', 'cr'],
      ['rerun', 'cr', '--failed', '--as', `cr-${auth}`],
    ]) {
      const r = await run(args);
      expect(r.stderr, args.join(' ')).not.toMatch(/Authorization|no answer from the backend/);
    }
  });
});
