import type { Command } from 'commander';
import { assertId } from '../../../actors/ids.js';
import { names } from '../../../streams/names.js';
import { loadProcessConfig } from '../../config.js';
import { Supervisor } from '../../dev/supervisor.js';
import type { SupervisorEvent } from '../../dev/supervisor.js';
import { createLogger } from '../../log.js';
import { connectNats } from '../../nats.js';
import { ApiClient } from '../../worker/api-client.js';
import { UsageError } from '../../display/output.js';

interface WorkersFlags {
  count: string;
  tags: string;
  slots: string;
  spot?: boolean;
  server?: string;
  prefix?: string;
}

/** A whole number of at least `min`, or a usage error naming the flag and the value. */
export function wholeNumber(flag: string, raw: string, min = 1): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < min) {
    throw new UsageError(`${flag}: ${JSON.stringify(raw)} is not a whole number >= ${min}`);
  }
  return n;
}

/** `a,b` -> ['a','b'], each checked against the id rule. */
export function parseTags(flag: string, raw: string): string[] {
  const tags = raw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (tags.length === 0) throw new UsageError(`${flag}: needs at least one tag`);
  tags.forEach((t) => assertId(flag, t));
  return tags;
}

/** One line per thing the supervisor saw; operators read these, so plain words. */
export function describeSupervisorEvent(e: SupervisorEvent): string {
  switch (e.type) {
    case 'spawned':
      return `worker ${e.workerId} started (pid ${e.pid}, tags ${e.spec.tags.join(',')}, ${e.spec.slots} slot(s))`;
    case 'exited':
      return `worker ${e.workerId} exited (${e.signal ? `signal ${e.signal}` : `code ${e.code}`})`;
    case 'reported':
      return e.outcome === 'reported'
        ? `worker ${e.workerId}: sonar.api.exited answered (tasks it still held are requeued at once)`
        : e.outcome === 'not-joined'
          ? `worker ${e.workerId} had not joined: nothing to recover`
          : `worker ${e.workerId}: sonar.api.exited not answered (recovery falls back to the registry TTL)`;
    case 'respawning':
      return `respawning a worker in ${e.afterMs} ms`;
  }
}

/**
 * `sonar workers --count N --tags a,b [--slots N] [-- CMD...]`: N local worker
 * processes under a supervisor. A child that dies is reported at once (`sonar.api.exited`)
 * and replaced by a fresh worker id. SIGTERM or SIGINT drains every child, then exits. When
 * the supervisor dies without that (SIGKILL, OOM), each child sees its IPC channel close and
 * drains on its own, so none is left running unsupervised.
 */
export function registerWorkers(program: Command): void {
  program
    .command('workers')
    .summary(
      'run N local workers under a supervisor: a dead worker is reported at once and respawned',
    )
    .description(
      'run N local `sonar worker` processes under a supervisor: a child that dies is reported to the backend at once (sonar.api.exited: its tasks are requeued without waiting for its pulse to expire) and respawned with a fresh worker id, with a backoff while it keeps dying. ' +
        'SIGTERM or SIGINT drains every child, then exits; a child whose supervisor dies drains on its own.',
    )
    .option('--count <n>', 'how many worker processes', '1')
    .requiredOption('--tags <tags>', 'comma-separated routing tags of every worker, e.g. linux,gpu')
    .option('--slots <n>', 'tasks at once per worker', '1')
    .option('--spot', 'workers watch for spot interruption notices')
    .option('--no-spot', 'workers never watch for spot notices')
    .option('--server <url>', 'NATS server (default: SONAR_NATS_URL)')
    .option('--prefix <prefix>', 'topology prefix (default: SONAR_PREFIX)')
    .argument('[command...]', "after `--`: the command every task runs (default: the task's own)")
    .addHelpText(
      'after',
      "\nExample:\n  sonar workers --count 3 --tags linux --slots 2 -- sh -c 'cat'\n\n" +
        'Worker logs go to stderr; supervisor lines to stdout. Each child is\n' +
        '`sonar worker --worker-id <fresh id> ...` with this environment (SONAR_*).',
    )
    .action(async (command: string[], flags: WorkersFlags) => {
      const count = wholeNumber('--count', flags.count);
      const slots = wholeNumber('--slots', flags.slots);
      const tags = parseTags('--tags', flags.tags);
      const config = loadProcessConfig({
        SONAR_NATS_URL: flags.server,
        SONAR_PREFIX: flags.prefix,
      });
      const nc = await connectNats(config, { name: 'sonar-supervisor' });
      const spotArgs = flags.spot === undefined ? [] : [flags.spot ? '--spot' : '--no-spot'];
      const supervisor = new Supervisor({
        specs: Array.from({ length: count }, () => ({
          tags,
          slots,
          args: spotArgs,
          ...(command.length > 0 && { command }),
        })),
        api: new ApiClient(nc, names(config.prefix)),
        env: { SONAR_NATS_URL: config.natsUrl, SONAR_PREFIX: config.prefix },
        stopTimeoutMs: config.drainGraceMs + 10_000,
        onEvent: (e) => process.stdout.write(`${describeSupervisorEvent(e)}\n`),
        log: createLogger({ component: 'supervisor', level: config.logLevel }),
      });
      supervisor.start();
      await new Promise<void>((resolve) => {
        process.once('SIGTERM', resolve);
        process.once('SIGINT', resolve);
      });
      process.stdout.write('stopping: workers drain\n');
      await supervisor.stop();
      await nc.close().catch(() => {});
    });
}
