import {
  ErrorCode,
  IllegalTransitionError,
  SonarError,
  ValidationError,
} from '../../../actors/errors.js';
import type { Aggregate, ScheduleSnapshot } from '../../../actors/projection.js';
import { manualRunId } from '../../../actors/schedule/schedule-run-ids.js';
import {
  MAX_MISSED_AFTER_MS,
  scheduleEventData,
} from '../../../actors/schedule/schedule.events.js';
import type { ScheduleEvent } from '../../../actors/schedule/schedule.events.js';
import { RUN_IDS_KEPT } from '../../../actors/schedule/schedule.machine.js';
import type { ScheduleContext } from '../../../actors/schedule/schedule.machine.js';
import { createHash } from 'node:crypto';
import type { ParsedRequestOf } from '../../protocol.js';
import { canonicalJson } from '../../run-file.js';
import { dueTimesOf } from '../../schedules/due-times.js';
import { isOwedFull } from '../../schedules/next-fire.js';
import { parseRunTemplate } from '../../schedules/run-template.js';
import { listSchedules, scheduleInfo } from '../../schedules/schedule-info.js';
import type { ScheduleInfo } from '../../schedules/schedule-info.js';
import { newId } from '../../ids.js';
import type { BackendContext } from '../context.js';
import type { Logger } from '../../log.js';
import { RunSubmitter } from './run-submitter.js';

/** How long a request waits for this backend to hold the schedule's latest event. */
const CATCH_UP_TIMEOUT_MS = 5_000;

/** The settings of a schedule that `create` must match for a repeated create to be the same. */
const settingsOf = (c: ScheduleContext) => ({
  name: c.name,
  cron: c.cron,
  timezone: c.timezone,
  everyMs: c.everyMs,
  run: c.run,
  overlap: c.overlap,
  catchUp: c.catchUp,
  catchUpLimit: c.catchUpLimit,
  missedAfterMs: c.missedAfterMs,
});

/**
 * The operator's side of schedules (`sonar schedule ...`, `sonar.api.schedule.*`), served by
 * any backend: each verb is judged on the schedule as the log holds it and appended with the
 * schedule's last sequence, through the backend's EventWriter. Every verb is idempotent: a
 * repeated create of the same schedule, a pause of a paused one, a trigger retried with the
 * same `requestId`, all answer as the first did.
 */
export class ScheduleAdmin {
  private readonly submitter: RunSubmitter;

  constructor(
    private readonly ctx: BackendContext,
    log: Logger,
  ) {
    this.submitter = new RunSubmitter(ctx, log);
  }

  private async current(name: string): Promise<Aggregate<ScheduleSnapshot> | undefined> {
    const subject = this.ctx.names.subjects.schedule(name);
    await this.ctx.loop.waitFor(await this.ctx.store.lastSeqOf(subject), CATCH_UP_TIMEOUT_MS);
    return this.ctx.loop.projection.schedules.get(name);
  }

  private async existing(name: string): Promise<Aggregate<ScheduleSnapshot>> {
    const entry = await this.current(name);
    if (!entry) {
      throw new SonarError(ErrorCode.NotFound, `no schedule ${JSON.stringify(name)}`, { name });
    }
    return entry;
  }

  private info(name: string): ScheduleInfo {
    const p = this.ctx.loop.projection;
    return scheduleInfo(p, p.schedules.get(name)!, this.ctx.now());
  }

  private async write(name: string, type: ScheduleEvent['type'], data: unknown, id?: string) {
    return this.ctx.writer.write({
      subject: this.ctx.names.subjects.schedule(name),
      type,
      data,
      ...(id !== undefined && { id }),
    });
  }

  async create(req: ParsedRequestOf<'schedule.create'>): Promise<ScheduleInfo> {
    const run = parseRunTemplate(req.run, { maxInputBytes: this.ctx.config.maxInputBytes });
    const spec = {
      cron: req.cron ?? null,
      timezone: req.cron === undefined ? (req.timezone ?? null) : (req.timezone ?? 'UTC'),
      everyMs: req.everyMs ?? null,
    };
    if (spec.timezone !== null && spec.cron === null) {
      throw new ValidationError("'timezone' goes with cron only", [
        { path: 'timezone', message: 'goes with cron only' },
      ]);
    }
    dueTimesOf(spec);
    if (req.missedAfterMs !== undefined && req.missedAfterMs > MAX_MISSED_AFTER_MS) {
      const message = `is ${req.missedAfterMs} ms, over the bound of ${MAX_MISSED_AFTER_MS} ms (1d): a due time seen later than that is missed, and catch-up decides`;
      throw new ValidationError(`'missedAfterMs' ${message}`, [{ path: 'missedAfterMs', message }]);
    }
    const parsed = scheduleEventData.ScheduleCreated.parse({
      name: req.name,
      ...(spec.cron !== null && { cron: spec.cron, timezone: spec.timezone }),
      ...(spec.everyMs !== null && { everyMs: spec.everyMs }),
      run,
      overlap: req.overlap,
      catchUp: req.catchUp,
      catchUpLimit: req.catchUpLimit,
      missedAfterMs: req.missedAfterMs,
    });
    const wanted = canonicalJson({
      ...parsed,
      cron: parsed.cron ?? null,
      timezone: parsed.timezone ?? null,
      everyMs: parsed.everyMs ?? null,
    });
    const entry = await this.current(req.name);
    if (entry) {
      if (entry.snapshot.value === 'Deleted') {
        throw new SonarError(
          ErrorCode.Conflict,
          `schedule ${req.name} was deleted: choose another name`,
          { name: req.name },
        );
      }
      if (canonicalJson(settingsOf(entry.snapshot.context)) === wanted) return this.info(req.name);
      throw new SonarError(
        ErrorCode.Conflict,
        `schedule ${req.name} exists with other settings: delete it first, or choose another name`,
        { name: req.name },
      );
    }
    const hash = createHash('sha256').update(wanted).digest('hex').slice(0, 32);
    await this.write(req.name, 'ScheduleCreated', parsed, `create.${req.name}.${hash}`);
    return this.info(req.name);
  }

  async list(req: ParsedRequestOf<'schedule.list'>): Promise<{ schedules: ScheduleInfo[] }> {
    if (req.name !== undefined) await this.existing(req.name);
    else await this.ctx.loop.waitFor(await this.ctx.store.endSeq(this.ctx.loop.position));
    return { schedules: listSchedules(this.ctx.loop.projection, this.ctx.now(), req.name) };
  }

  /** Pause, resume or delete: a schedule already there answers as it is. */
  async move(
    req: { name: string; by?: string | undefined },
    type: 'SchedulePaused' | 'ScheduleResumed' | 'ScheduleDeleted',
  ): Promise<ScheduleInfo> {
    const entry = await this.existing(req.name);
    const target = {
      SchedulePaused: 'Paused',
      ScheduleResumed: 'Active',
      ScheduleDeleted: 'Deleted',
    };
    if (entry.snapshot.value === target[type]) return this.info(req.name);
    if (entry.snapshot.value === 'Deleted') {
      throw new IllegalTransitionError('schedule', 'Deleted', type);
    }
    await this.write(req.name, type, req.by === undefined ? {} : { by: req.by });
    return this.info(req.name);
  }

  /**
   * Fires the schedule now, whatever its due times and overlap policy say (an operator asked),
   * Paused or not, and submits the run. Its run id is `<name>-<time>-manual`, apart from the
   * due times' runs.
   */
  async trigger(
    req: ParsedRequestOf<'schedule.trigger'>,
  ): Promise<{ name: string; runId: string; submitted: boolean }> {
    const entry = await this.existing(req.name);
    if (entry.snapshot.value === 'Deleted') {
      throw new IllegalTransitionError('schedule', 'Deleted', 'ScheduleFired');
    }
    const at = Math.floor(this.ctx.now() / 1000) * 1000;
    let runId = manualRunId(req.name, at);
    const again = entry.snapshot.context.recent.some((f) => f.runId === runId);
    if (!again && isOwedFull(this.ctx.loop.projection, entry.snapshot.context)) {
      throw new SonarError(
        ErrorCode.Overloaded,
        `schedule ${req.name} owes ${RUN_IDS_KEPT} runs not submitted yet: trigger it once they are`,
        { name: req.name },
      );
    }
    if (!again) {
      const written = await this.write(
        req.name,
        'ScheduleFired',
        { dueAt: new Date(at).toISOString(), runId, trigger: 'manual' },
        `trigger.${req.name}.${req.requestId ?? newId()}`,
      );
      if (written.duplicate) {
        // A retried request: the first one's fire is the latest manual one.
        const recent = this.ctx.loop.projection.schedules.get(req.name)!.snapshot.context.recent;
        runId = recent.filter((f) => f.trigger === 'manual').at(-1)?.runId ?? runId;
      }
    }
    const s = this.ctx.loop.projection.schedules.get(req.name)!.snapshot.context;
    const submitted = await this.submitter.submit(s, runId);
    return { name: req.name, runId, submitted };
  }
}
