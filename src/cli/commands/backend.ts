import type { Command } from 'commander';
import { Backend } from '../../backend/backend.js';
import { defaultParts } from '../../default-parts.js';
import { serveUntilSignal } from '../../backend/serve-until-signal.js';
import { SETTINGS } from '../../config-table.js';
import { configFlag, configVariables, loadProcessConfig } from '../../config.js';
import { assertHttpExposure } from '../../http/exposure.js';
import { configHelp } from '../config-help.js';
import { reportError } from '../../display/output.js';

/**
 * `sonar backend` (DESIGN.md section 8): one backend process (API, projection, reconciler,
 * finalizers). Every `SONAR_*` variable is also a flag (`--pulse-ttl 15s`). Stops on SIGTERM or
 * SIGINT within SONAR_STOP_GRACE.
 */
export function registerBackend(program: Command): void {
  const cmd = program
    .command('backend')
    .summary('run a backend: the API, the projection, the reconciler and finalizers')
    .description(
      'run a backend: the API, the projection, the reconciler and finalizers. Run any number: each serves the API and finalizes, and the one holding the leader lock reconciles. ' +
        'Every SONAR_* setting is also a flag (SONAR_PULSE_TTL is --pulse-ttl); a flag wins over the environment (docs/configuration.md). ' +
        'SIGTERM or SIGINT stops it, each part within SONAR_STOP_GRACE.',
    );
  for (const v of configVariables) {
    const row: { switch?: true } = SETTINGS[v];
    cmd.option(`--${configFlag(v)}${row.switch ? '' : ' <value>'}`, configHelp(v));
  }
  cmd.option('--server <url>', 'NATS server (same as --nats-url)');
  cmd.action(async (flags: Record<string, string | boolean | undefined>) => {
    const config = loadProcessConfig({
      ...flags,
      ...(flags['server'] !== undefined && { SONAR_NATS_URL: flags['server'] }),
    });
    // Before connecting: an open dashboard on the network is refused with one clear line.
    assertHttpExposure(config);
    // A failed start (e.g. refused by --strict-durability) leaves its half-made connection
    // open, which would keep the process alive after the error: exit, so a supervisor sees it.
    const backend = await Backend.start({ config, parts: defaultParts }).catch((err: unknown) =>
      process.exit(reportError(err)),
    );
    // Stops within SONAR_STOP_GRACE and exits even with a part left running.
    await serveUntilSignal(backend, { graceMs: config.stopGraceMs });
  });
}
