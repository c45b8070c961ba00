import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { ApiClient } from '../../worker/api-client.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';

/** What `sonar.api.revoke` answers. */
interface RevokeReply {
  workerId: string;
  revoked: boolean;
  /** Whether the backend pushed the revocation to the server (the worker is cut off now). */
  pushed: boolean;
}

/** `sonar revoke WORKER [--reason TEXT]`: an operator cuts one worker off. */
export function registerRevoke(program: Command): void {
  program
    .command('revoke')
    .summary(
      "revoke a worker's credential: it is declared Lost (its tasks requeued) and disconnected",
    )
    .description(
      "revoke a worker's credential: it is declared Lost (its tasks requeued) and disconnected; its id may never enroll or renew again. Prints whether the revocation was pushed to the server (then the worker is cut off at once).",
    )
    .argument('<worker>', 'worker id')
    .option('--reason <text>', 'recorded in the backend log', 'revoked by operator')
    .option('--json', 'print JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (worker: string, opts: ConnectionFlags & { reason: string; json?: boolean }) => {
      assertId('worker', worker);
      await withConnection(opts, async ({ nc, names }) => {
        const r = await new ApiClient(nc, names).request<'revoke', RevokeReply>('revoke', {
          workerId: worker,
          reason: opts.reason,
        });
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(r)}\n`
            : `revoked worker ${worker}: ${r.pushed ? 'disconnected now' : 'its credential lapses at expiry (the backend pushes no revocations)'}\n`,
        );
      });
    });
}
