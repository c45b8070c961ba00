import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SONAR_BIN } from '../helpers/worker-fixtures.js';

let dir: string | undefined;
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Environment without any SONAR_* a developer may have exported. */
const cleanEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SONAR_')));

describe('sonar dev --demo --fast (the CI smoke test of `npm start`)', () => {
  it('runs the demo to a successful end with the recovery visible, stops everything, exits 0 within 60 s', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sonar-dev-'));
    const started = performance.now();
    const child = spawn(process.execPath, [SONAR_BIN, 'dev', '--demo', '--fast', '--port', '0'], {
      cwd: dir,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearTimeout(timer);
    const ms = performance.now() - started;
    const context = `\n--- stdout ---\n${out.slice(-4000)}\n--- stderr ---\n${err.slice(-2000)}`;
    expect(code, context).toBe(0);
    expect(ms).toBeLessThan(60_000);
    expect(out).toMatch(/sonar dev: NATS at nats:\/\/127\.0\.0\.1:\d+/);
    expect(out, context).toMatch(/task p3 failed \(exit 3/);
    expect(out, context).toMatch(/SIGKILL worker \S+ while it runs task process\.p\d/);
    expect(out, context).toMatch(/supervisor: sonar\.api\.exited sent for/);
    expect(out, context).toMatch(/requeued \(worker-lost\)/);
    expect(out, context).toMatch(/running again on worker/);
    expect(out, context).toMatch(/run demo-\S+ Succeeded in/);
    expect(out).toMatch(/recoveries {2}[1-9]/);
    expect(out).toMatch(/retries {5}1/);
    // Stopped and cleaned up: no pid file of a running server is left behind.
    expect(existsSync(join(dir, '.sonar', 'nats.pid'))).toBe(false);
    console.log(`sonar dev --demo --fast: ${Math.round(ms)} ms`);
  }, 90_000);
});
