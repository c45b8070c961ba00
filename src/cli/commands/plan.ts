import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { PlanConfig } from '../../../actors/reconciler/config.js';
import type { Decisions } from '../../../actors/reconciler/decisions.js';
import { plan } from '../../../actors/reconciler/plan.js';
import { replay } from '../../../actors/replay.js';
import { splitLines } from '../../../streams/jsonl.js';
import { parseDuration } from '../../duration.js';
import { registryEntrySchema } from '../../protocol.js';
import type { RegistryEntry } from '../../protocol.js';
import { UsageError } from '../../display/output.js';
import { issuesOf, listIssues } from '../../../actors/errors.js';
import { SETTINGS } from '../../config-table.js';
import { parseTagRates } from '../../../actors/reconciler/tag-rates.js';
import type { TagRates } from '../../../actors/reconciler/tag-rates.js';

interface PlanFlags {
  live: string;
  now: string;
  json?: boolean;
  publishTimeout: string;
  orphanAge: string;
  recoveryLimit: string;
  recoveryWindow: string;
  capacityMultiplier: string;
  batch: string;
  pulseTtl: string;
  priorityAging: string;
  tagRates?: string;
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err: unknown) {
    throw new UsageError(
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
}

/** `live.json`: an array of registry entries (DESIGN.md section 4); every problem listed. */
async function readLive(file: string): Promise<RegistryEntry[]> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readText(file));
  } catch (err: unknown) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${file} is not JSON: ${(err as Error).message}`);
  }
  const parsed = registryEntrySchema.array().safeParse(raw);
  if (!parsed.success) {
    const { text } = listIssues(issuesOf(parsed.error));
    throw new UsageError(`${file} is not an array of registry entries: ${text}`);
  }
  return parsed.data;
}

function duration(flag: string, value: string): number {
  try {
    return parseDuration(value);
  } catch (err: unknown) {
    throw new UsageError(`--${flag}: ${(err as Error).message}`);
  }
}

function whole(flag: string, value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) {
    throw new UsageError(`--${flag}: ${JSON.stringify(value)} is not a whole number of 1 or more`);
  }
  return Number(value);
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) {
    throw new UsageError(`--${flag}: ${JSON.stringify(value)} is not a number above 0 (e.g. 1.5)`);
  }
  return n;
}

/** `--tag-rates`, read by SONAR_TAG_RATES' own parser: the same syntax and the same errors. */
function tagRates(value: string | undefined): TagRates | undefined {
  if (value === undefined) return undefined;
  try {
    return SETTINGS.SONAR_TAG_RATES.parse(value);
  } catch (err: unknown) {
    throw new UsageError(`--tag-rates: ${(err as Error).message}`);
  }
}

function configOf(flags: PlanFlags): PlanConfig {
  const rates = tagRates(flags.tagRates);
  return {
    publishTimeoutMs: duration('publish-timeout', flags.publishTimeout),
    orphanAgeMs: duration('orphan-age', flags.orphanAge),
    recoveryLimit: whole('recovery-limit', flags.recoveryLimit),
    recoveryWindowMs: duration('recovery-window', flags.recoveryWindow),
    capacityMultiplier: positive('capacity-multiplier', flags.capacityMultiplier),
    batch: whole('batch', flags.batch),
    pulseTtlMs: duration('pulse-ttl', flags.pulseTtl),
    priorityAgingMs: duration('priority-aging', flags.priorityAging),
    ...(rates && { tagRates: rates }),
    // A log and a registry snapshot: nothing restarted, the registry is taken as watched.
    ageFloorPassed: true,
  };
}

function section(title: string, lines: string[]): string[] {
  return lines.length === 0 ? [`${title}: none`] : [`${title} (${lines.length}):`, ...lines];
}

function summarize(d: Decisions, now: string): string {
  const tags = Object.entries(d.capacity.tags).map(([t, n]) => `${t} ${n}`);
  const steps = Object.entries(d.capacity.steps).map(([s, n]) => `${s} ${n}`);
  const lines = [
    `plan at ${now}`,
    `capacity: global ${d.capacity.global}; tags ${tags.join(', ') || 'none'}; steps ${steps.join(', ') || 'none'}`,
    ...section(
      'requeue',
      d.requeue.map((r) => `  ${r.task}  ${r.reason}`),
    ),
    ...section(
      'dead',
      d.dead.map((r) => `  ${r.task}  recovery-limit`),
    ),
    ...section(
      'publish',
      d.publish.map((r) => `  ${r.task} -> ${r.tag}`),
    ),
    ...section(
      'starved',
      d.starved.map((s) => `  ${s}`),
    ),
    ...(d.rateLimited
      ? section(
          'rate-limited tags',
          Object.entries(d.rateLimited).map(([t, r]) => `  ${t}  ${r.rate}  ${r.left} left`),
        )
      : []),
    ...(d.delayed
      ? section(
          'delayed',
          Object.entries(d.delayed).map(([s, n]) => `  ${s}  ${n}`),
        )
      : []),
  ];
  return `${lines.join('\n')}\n`;
}

/** DESIGN.md section 8's defaults, spelled as an operator writes them (DEFAULT_PLAN_CONFIG). */
const DEFAULTS = {
  publishTimeout: '10m',
  orphanAge: '10m',
  recoveryLimit: '3',
  recoveryWindow: '72h',
  capacityMultiplier: '1',
  batch: '8',
  pulseTtl: '15s',
  priorityAging: '1m',
} as const;

/**
 * `sonar plan events.jsonl --live live.json --now ISO [--json]` (DESIGN.md section 8): what
 * the reconciler would decide on one tick, from an event log and a registry snapshot. The age
 * floor is taken as passed. Every default is a flag.
 */
export function registerPlan(program: Command): void {
  program
    .command('plan')
    .summary("print one reconcile tick's decisions for an event log and a registry snapshot")
    .description(
      "print one reconcile tick's decisions (what the leading backend would publish, requeue or declare Lost) for an event log and a registry snapshot, at the clock --now, with the reconciler's own pure planner; the age floor after a start is taken as passed. " +
        'Needs no server: it explains a decision from an exported log. Every planner setting is a flag.',
    )
    .argument('<events>', 'event log, one event per line (`sonar export` writes one)')
    .requiredOption('--live <file>', 'registry snapshot: a JSON array of registry entries')
    .requiredOption('--now <time>', 'the clock, ISO-8601 (e.g. 2026-01-01T00:10:00.000Z)')
    .option('--json', 'print the decisions as JSON (DESIGN.md section 8)')
    .option(
      '--publish-timeout <duration>',
      'requeue a Published task after',
      DEFAULTS.publishTimeout,
    )
    .option(
      '--orphan-age <duration>',
      'requeue a Running task of a worker not live after',
      DEFAULTS.orphanAge,
    )
    .option(
      '--recovery-limit <n>',
      'counted recoveries in the window that kill a task',
      DEFAULTS.recoveryLimit,
    )
    .option(
      '--recovery-window <duration>',
      'window recoveries are counted in',
      DEFAULTS.recoveryWindow,
    )
    .option('--capacity-multiplier <x>', 'capacity = floor(x * slots)', DEFAULTS.capacityMultiplier)
    .option('--batch <n>', 'tasks a step places per turn', DEFAULTS.batch)
    .option('--pulse-ttl <duration>', 'a pulse this old is still recent', DEFAULTS.pulseTtl)
    .option(
      '--priority-aging <duration>',
      'a waiting priority level ranks one higher per (0: strict)',
      DEFAULTS.priorityAging,
    )
    .option(
      '--tag-rates <rates>',
      "per-tag publish rate limits as SONAR_TAG_RATES (e.g. api=20/s,gpu=1/m); default: those the log's last ReconcilerElected announced",
    )
    .action(async (events: string, flags: PlanFlags) => {
      const now = Date.parse(flags.now);
      if (Number.isNaN(now)) {
        throw new UsageError(`--now: ${JSON.stringify(flags.now)} is not an ISO-8601 time`);
      }
      const config = configOf(flags);
      const live = await readLive(flags.live);
      const { projection, skipped } = replay(splitLines(await readText(events)));
      if (skipped.length > 0) {
        process.stderr.write(
          `warning: ${skipped.length} event line(s) skipped (see sonar replay ${events})\n`,
        );
      }
      const announced = projection.leader?.tagRates;
      if (flags.tagRates === undefined && announced !== undefined) {
        // The log's last leader said what it limited: plan as it placed, unless told otherwise.
        try {
          config.tagRates = parseTagRates(announced);
          process.stderr.write(
            `note: the rates the last leader announced: ${announced} (--tag-rates overrides; --tag-rates '' plans without)\n`,
          );
        } catch (err: unknown) {
          process.stderr.write(
            `warning: the last leader's rates ${JSON.stringify(announced)} are not read: ${(err as Error).message}\n`,
          );
        }
      }
      const decisions = plan(projection, live, now, config);
      process.stdout.write(
        flags.json
          ? `${JSON.stringify(decisions, null, 2)}\n`
          : summarize(decisions, new Date(now).toISOString()),
      );
    });
}
