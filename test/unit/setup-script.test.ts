import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const SETUP = join(import.meta.dirname, '..', '..', 'scripts', 'setup.mjs');

/** A fake apt-get: records each call with DEBIAN_FRONTEND; `install` puts a nats-server in bin. */
const fakeAptGet = (calls: string, bin: string, needsUpdate: boolean) => `
echo "$DEBIAN_FRONTEND $*" >> ${calls}
if [ "$1" = update ]; then touch ${calls}.updated; exit 0; fi
if [ "$1" = install ]; then
  ${needsUpdate ? `[ -e ${calls}.updated ] || exit 100` : ''}
  printf '#!/bin/sh\\necho nats-server\\n' > ${bin}/nats-server
  chmod +x ${bin}/nats-server
  exit 0
fi
exit 1`;

/** The sandboxes' roots, removed after each test. */
let roots: string[] = [];
afterEach(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
  roots = [];
});

/**
 * scripts/setup.mjs's nats-server branches, run as a child in a throwaway root: a copy of the
 * script next to an empty node_modules/ and no lockfile (so it installs no dependencies), a
 * PATH of our own, and the test-only hooks for the uid and the off-PATH install dirs.
 */
function sandbox() {
  const root = mkdtempSync(join(tmpdir(), 'sonar-setup-'));
  roots.push(root);
  mkdirSync(join(root, 'scripts'));
  mkdirSync(join(root, 'node_modules'));
  copyFileSync(SETUP, join(root, 'scripts', 'setup.mjs'));
  const bin = join(root, 'bin');
  const empty = join(root, 'nowhere');
  mkdirSync(bin);
  mkdirSync(empty);
  const calls = join(root, 'apt-calls.log');
  const exe = (name: string, body: string) => {
    writeFileSync(join(bin, name), `#!/bin/sh\nPATH=/usr/bin:/bin\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  const pgRoot = join(root, 'postgresql');
  const run = (uid: number, args: string[] = []) =>
    spawnSync(process.execPath, [join(root, 'scripts', 'setup.mjs'), ...args], {
      encoding: 'utf8',
      env: {
        PATH: bin,
        SONAR_SETUP_FAKE_UID: String(uid),
        SONAR_SETUP_OFF_PATH_DIRS: empty,
        SONAR_SETUP_PG_ROOT: pgRoot,
      },
    });
  /** Puts the fake apt-get on PATH; `needsUpdate` makes its first install fail. */
  const aptGet = (needsUpdate: boolean) => exe('apt-get', fakeAptGet(calls, bin, needsUpdate));
  return { root, bin, calls, exe, aptGet, run, pgRoot };
}

describe('scripts/setup.mjs', () => {
  it('is quiet and exits 0 when nats-server is on PATH', () => {
    const s = sandbox();
    s.exe('nats-server', 'echo nats-server');
    const r = s.run(1000);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('installs nats-server with apt-get when it is missing and we are root', () => {
    const s = sandbox();
    s.aptGet(false);
    const r = s.run(0);
    expect(r.stderr).toBe('sonar: installing nats-server with apt-get\n');
    expect(r.status).toBe(0);
    expect(readFileSync(s.calls, 'utf8')).toBe('noninteractive install -y nats-server\n');
    expect(existsSync(join(s.bin, 'nats-server'))).toBe(true);
  });

  it('runs apt-get update and installs again when the first install fails (no package lists)', () => {
    const s = sandbox();
    s.aptGet(true);
    const r = s.run(0);
    expect(r.status).toBe(0);
    expect(readFileSync(s.calls, 'utf8').trim().split('\n')).toEqual([
      'noninteractive install -y nats-server',
      'noninteractive update',
      'noninteractive install -y nats-server',
    ]);
  });

  it('stops with one line and exit 1 when it is missing and we are not root', () => {
    const s = sandbox();
    s.aptGet(false);
    const r = s.run(1000);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      'sonar: nats-server is missing: install it with `sudo apt-get install -y nats-server`\n',
    );
    expect(existsSync(s.calls)).toBe(false);
  });

  describe('--postgres', () => {
    /** A fake apt-get whose `install -y postgresql` lays out Debian's bin dir. */
    const fakePgAptGet = (calls: string, pgRoot: string) => `
echo "$DEBIAN_FRONTEND $*" >> ${calls}
if [ "$1" = update ]; then exit 0; fi
if [ "$1" = install ]; then
  mkdir -p ${pgRoot}/15/bin
  for b in postgres initdb; do printf '#!/bin/sh\\n' > ${pgRoot}/15/bin/$b; chmod +x ${pgRoot}/15/bin/$b; done
  exit 0
fi
exit 1`;

    it('updates the package lists, then installs postgresql, when we are root', () => {
      const s = sandbox();
      s.exe('nats-server', 'echo nats-server');
      s.exe('apt-get', fakePgAptGet(s.calls, s.pgRoot));
      const r = s.run(0, ['--postgres']);
      expect(r.stderr).toBe('sonar: installing postgresql with apt-get\n');
      expect(r.status).toBe(0);
      expect(readFileSync(s.calls, 'utf8').trim().split('\n')).toEqual([
        'noninteractive update',
        'noninteractive install -y postgresql',
      ]);
      // Installed: quiet the next time.
      expect(s.run(0, ['--postgres']).stderr).toBe('');
    });

    it('stops with one line saying what to do when it cannot install', () => {
      const s = sandbox();
      s.exe('nats-server', 'echo nats-server');
      const notRoot = s.run(1000, ['--postgres']);
      expect(notRoot.status).toBe(1);
      expect(notRoot.stderr).toBe(
        'sonar: PostgreSQL is missing: install it with `sudo apt-get install -y postgresql`\n',
      );
      const noApt = s.run(0, ['--postgres']);
      expect(noApt.status).toBe(1);
      expect(noApt.stderr).toMatch(
        /^sonar: PostgreSQL is missing and apt-get is not available: install PostgreSQL by hand[^\n]*\n$/,
      );
    });

    it('is not asked for without the flag', () => {
      const s = sandbox();
      s.exe('nats-server', 'echo nats-server');
      expect(s.run(1000).status).toBe(0);
    });
  });
});
