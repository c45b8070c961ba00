import { readFile } from 'node:fs/promises';
import { hostname, userInfo } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Command } from 'commander';
import { explainMissingStreams } from '../../streams/missing-topology.js';
import { names } from '../../streams/names.js';
import type { Names } from '../../streams/names.js';
import { loadProcessConfig } from '../config.js';
import type { SonarConfig } from '../config.js';
import { connectNats } from '../nats.js';
import type { ConnectionLife } from '../nats.js';
import { UsageError } from '../display/output.js';

/** Options every networked verb takes. */
export interface ConnectionFlags {
  server?: string;
  prefix?: string;
}

/**
 * Adds `--json`, `--server` and `--prefix` to a subcommand of an operator verb
 * (`poisoned`, `schedule`), in the order its help lists them.
 */
export function withOperatorOptions(cmd: Command): Command {
  return cmd
    .option('--json', 'print JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)');
}

/** Who runs this CLI, `user@host`, for the `by` of the events an operator verb asks for. */
export function operatorName(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch (_err: unknown) {
    // userInfo() throws for a uid with no passwd entry (e.g. a bare container)
    return `operator@${hostname()}`;
  }
}

/** A file the user named, as text; one that cannot be read is a usage error (exit 2). */
export async function readUserFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err: unknown) {
    throw new UsageError(
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
}

export interface CliContext {
  config: SonarConfig;
  names: Names;
  nc: NatsConnection;
}

/**
 * Loads the config (env, then flags), connects, runs `fn`, and always closes. A verb that
 * asks once and prints is `one-shot` (a lost connection fails it at once, with one line);
 * one that follows the stream (`tail`, `submit --wait`) is `long-lived` and waits out an
 * outage.
 */
export async function withConnection<T>(
  flags: ConnectionFlags,
  fn: (ctx: CliContext) => Promise<T>,
  life: ConnectionLife = 'one-shot',
): Promise<T> {
  const config = loadProcessConfig({
    ...(flags.server ? { SONAR_NATS_URL: flags.server } : {}),
    ...(flags.prefix ? { SONAR_PREFIX: flags.prefix } : {}),
  });
  const nc = await connectNats(config, { life });
  const n = names(config.prefix);
  try {
    return await fn({ config, names: n, nc });
  } catch (err: unknown) {
    throw await explainMissingStreams(nc, n, err);
  } finally {
    await nc.close().catch(() => {});
  }
}
