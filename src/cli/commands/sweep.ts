import { hostname } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Command } from 'commander';
import { EventStore } from '../../../streams/event-store.js';
import type { BackendContext } from '../../backend/context.js';
import { DispatchConsumers } from '../../backend/reconciler/index.js';
import { EventWriter } from '../../backend/projection/index.js';
import { ProjectionLoop } from '../../backend/projection/index.js';
import { Liveness } from '../../backend/reconciler/index.js';
import { ServerContact } from '../../backend/server-contact.js';
import { Enrollments } from '../../backend/api/index.js';
import { Registry } from '../../backend/reconciler/index.js';
import { loadSnapshot } from '../../backend/snapshots/index.js';
import { FullSweep, summaryOf } from '../../backend/sweep/index.js';
import type { SweepReport } from '../../backend/sweep/index.js';
import { hostToken, newId } from '../../ids.js';
import { createLogger } from '../../log.js';
import { createOutputStore } from '../../storage/create-output-store.js';
import { withConnection } from '../context.js';
import type { CliContext, ConnectionFlags } from '../context.js';
import { writeOut } from '../../display/output.js';
import { processEnvironment } from '../../config.js';

interface SweepFlags extends ConnectionFlags {
  json?: boolean;
}

/**
 * A backend context inside the CLI process, so the sweep runs exactly the backend's code. Its
 * projection starts from the stored snapshot, like a backend's: runs that retention purged
 * live only there, and a snapshot this process writes must keep them.
 */
async function sweepContext(cli: CliContext): Promise<BackendContext> {
  const { nc, names, config } = cli;
  const log = createLogger({ level: processEnvironment.logLevel() ?? 'warn' });
  const jsm = await jetstreamManager(nc);
  const store = new EventStore(nc, names);
  const loop = new ProjectionLoop(store, log.child({ component: 'projection' }));
  await loop.start(
    await loadSnapshot({ nc, jsm, names, log }, { allowLoss: config.allowSnapshotLoss === true }),
  );
  return {
    config,
    names,
    nc,
    js: jetstream(nc),
    jsm,
    store,
    loop,
    writer: new EventWriter(store, loop),
    registry: await Registry.open(nc, names),
    enrollments: await Enrollments.open(nc, names),
    // The sweep mints nothing.
    credentials: null,
    dispatchConsumers: new DispatchConsumers(jsm, names),
    outputs: await createOutputStore(nc, config),
    log,
    // An operator's sweep judges the registry as it finds it, at once: it has seen no outage.
    contact: new ServerContact(nc, jsm, log, undefined, -Infinity),
    liveness: new Liveness(),
    nodeId: `sweep-${hostToken(hostname(), 40)}-${newId().slice(-8)}`,
    now: Date.now,
  };
}

function reportText(r: SweepReport): string {
  const s = summaryOf(r);
  const lines = [
    `workers lost            ${s['workersLost']}`,
    `dispatch messages       ${s['dispatchPurged']} purged of ${s['dispatchChecked']}`,
    `finalizations requeued  ${s['finalizationsReenqueued']}`,
    `stuck jobs              ${s['jobsStuck']}: ${s['jobsPoisoned']} poisoned, ${s['jobsDropped']} dropped, ${s['jobsUnidentified']} unidentified`,
    `consumers deleted       ${r.orphanConsumers.deleted.join(', ') || '0'}`,
    `runs purged             ${s['runsPurged']} of ${s['runsExpired']} expired${r.retention.skipped ? ` (skipped: ${r.retention.skipped})` : ''}`,
    `evicted                 ${s['runsEvicted']} runs, ${s['workersEvicted']} workers`,
    ...r.failed.map((f) => `FAILED ${f.repair}: ${f.error}`),
    `swept in ${r.ms} ms`,
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * `sonar sweep [--json]` (DESIGN.md section 8): one full sweep now, by hand, without claiming
 * the fleet's turn (operators, tests). Exit 1 when a repair failed.
 */
export function registerSweep(program: Command): void {
  program
    .command('sweep')
    .description(
      'run one full sweep now: stale dispatches, lost and stuck jobs, orphans, retention',
    )
    .option('--json', 'print the report as JSON')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .action(async (flags: SweepFlags) => {
      const report = await withConnection(flags, async (cli) => {
        const ctx = await sweepContext(cli);
        try {
          return await (await FullSweep.open(ctx)).run();
        } finally {
          await ctx.loop.stop();
        }
      });
      await writeOut(flags.json ? `${JSON.stringify(report, null, 2)}\n` : reportText(report));
      if (report.failed.length > 0) process.exitCode = 1;
    });
}
