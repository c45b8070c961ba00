/**
 * Debian's Chromium for the browser tests, driven by playwright-core. Playwright's
 * own browser download cannot work on this network, so the tests use `/usr/bin/chromium`,
 * installing it with `apt-get install -y chromium` when it is missing and we are root, as
 * scripts/setup.mjs does for nats-server. Where it cannot be installed, the tests skip and say
 * why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';

export const CHROMIUM = process.env['SONAR_CHROMIUM'] ?? '/usr/bin/chromium';

/**
 * Flags that keep Chromium quiet on a closed network: without the background-networking ones
 * it keeps trying Google's hosts. Playwright adds `--headless` and a fresh temporary profile
 * (`--user-data-dir`) itself on every launch.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
];

function aptInstall(): string | null {
  const run = (args: string[]) =>
    spawnSync('apt-get', args, {
      stdio: 'ignore',
      timeout: 600_000,
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  let r = run(['install', '-y', 'chromium']);
  // A fresh machine may have no package lists yet.
  if (r.status !== 0) {
    run(['update']);
    r = run(['install', '-y', 'chromium']);
  }
  if (r.error) return `apt-get could not run: ${r.error.message}`;
  return r.status === 0 ? null : `apt-get install -y chromium exited with ${r.status}`;
}

/** The Chromium binary, installed if need be; or why the browser tests must skip. */
export function ensureChromium(): { ok: true; path: string } | { ok: false; reason: string } {
  if (existsSync(CHROMIUM)) return { ok: true, path: CHROMIUM };
  if (process.getuid?.() !== 0) {
    return {
      ok: false,
      reason: `${CHROMIUM} is missing and we are not root: run apt-get install -y chromium`,
    };
  }
  const failed = aptInstall();
  if (failed === null && existsSync(CHROMIUM)) return { ok: true, path: CHROMIUM };
  return { ok: false, reason: `Chromium could not be installed (${failed ?? 'no binary'})` };
}

export function launchChromium(path: string): Promise<Browser> {
  return chromium.launch({ executablePath: path, headless: true, args: FLAGS });
}
