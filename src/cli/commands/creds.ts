import { join } from 'node:path';
import type { Command } from 'commander';
import { CREDENTIAL_FILE_USES, initCredentials } from '../../auth/creds-init.js';
import { loadProcessConfig } from '../../config.js';

/**
 * `sonar creds init DIR [--prefix P] [--resolver-dir PATH]`: the keys, JWTs and creds files
 * of secure mode, and the server's resolver.conf. Prints which file goes to which process.
 */
export function registerCreds(program: Command): void {
  const creds = program
    .command('creds')
    .summary('credentials for secure mode (NATS operator mode, one JWT per worker)')
    .description(
      'credentials for secure mode (NATS operator mode, one JWT per worker); docs/operations.md, "Credentials (secure mode)", says how to deploy them',
    );
  creds
    .command('init')
    .summary('write the operator, accounts, role creds, signing keys and resolver.conf')
    .description(
      'write the operator, accounts, role creds, signing keys and resolver.conf into DIR, and print which file goes to which process, as which setting. An existing file is never replaced: it is refused (exit 1).',
    )
    .argument('<dir>', 'directory to write into (created; existing files are never replaced)')
    .option('--prefix <prefix>', 'topology prefix the permissions name (default: SONAR_PREFIX)')
    .option(
      '--resolver-dir <path>',
      "the nats-server's account JWT directory written into resolver.conf (default: DIR/jwt)",
    )
    .option('--json', 'print {dir, accountPublicKey, files: [{file, path, use}]}')
    .action(
      async (dir: string, opts: { prefix?: string; resolverDir?: string; json?: boolean }) => {
        const config = loadProcessConfig(opts.prefix ? { SONAR_PREFIX: opts.prefix } : {});
        const { credentials, paths } = await initCredentials(dir, {
          prefix: config.prefix,
          ...(opts.resolverDir !== undefined && { resolverDir: opts.resolverDir }),
        });
        if (opts.json) {
          const files = CREDENTIAL_FILE_USES.map((u) => ({
            file: u.file,
            path: join(paths.dir, u.file),
            use: u.use,
          }));
          process.stdout.write(
            `${JSON.stringify({ dir: paths.dir, accountPublicKey: credentials.account.publicKey, files })}\n`,
          );
          return;
        }
        const width = Math.max(...CREDENTIAL_FILE_USES.map((u) => u.file.length));
        const lines = CREDENTIAL_FILE_USES.map((u) => `${u.file.padEnd(width)}  ${u.use}`);
        process.stdout.write(
          `wrote ${paths.dir} (prefix ${credentials.prefix})\n${lines.join('\n')}\n`,
        );
      },
    );
}
