import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { EventStore } from '../../../streams/event-store.js';
import { purgedEvents } from '../../backend/snapshots/index.js';
import { isOfRun, toJsonlLine } from '../../../streams/jsonl.js';
import { withConnection } from '../context.js';
import type { ConnectionFlags } from '../context.js';
import { writeOut } from '../../display/output.js';

/**
 * `sonar export [--run ID]`: the event log as JSONL on stdout, in stream order. Events that
 * retention purged are gone from the stream, so no export holds them (their runs' state is in
 * the projection snapshot, which is not an event log): a note on stderr says how many.
 */
export function registerExport(program: Command): void {
  program
    .command('export')
    .summary('write the event log as JSONL to stdout')
    .description(
      'write the event log as JSONL to stdout, in stream order, one {seq, subject, time, type, data} per line: what `sonar replay` and `sonar plan` read. ' +
        'Events that retention purged (SONAR_RETENTION) are no longer in the stream and so not in the export: a note on stderr says how many.',
    )
    .option('--run <id>', 'only the events of this run')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (opts: ConnectionFlags & { run?: string }) => {
      if (opts.run !== undefined) assertId('--run', opts.run);
      await withConnection(opts, async ({ nc, names }) => {
        const store = new EventStore(nc, names);
        const jsm = await store.jsm();
        const purged = purgedEvents((await jsm.streams.info(names.streams.events)).state);
        if (purged !== null) {
          process.stderr.write(
            `sonar: note: ${purged.count} events were purged from ${names.streams.events} ` +
              'by retention (SONAR_RETENTION) and are not in this export\n',
          );
        }
        let chunk = '';
        // 2.9 takes one filter per consumer and a run spans three subject shapes: filter here.
        await store.replay((r) => {
          if (opts.run !== undefined && !isOfRun(r.subject, opts.run)) return;
          chunk += `${toJsonlLine(r)}\n`;
          if (chunk.length < 1 << 16) return;
          const out = chunk;
          chunk = '';
          return writeOut(out);
        });
        await writeOut(chunk);
      });
    });
}
