/**
 * A schedule's run template: a run file without its `runId`, which each fire sets. Checked
 * whole when the schedule is created, with the run-file rules, so that a fire never meets a
 * template the backend refuses.
 *
 * @module
 */
import { ValidationError } from '../../actors/errors.js';
import type { Issue } from '../../actors/errors.js';
import type { RunTemplate } from '../../actors/schedule/schedule.events.js';
import type { ParsedRunFile, RunFile } from '../protocol.js';
import { validateRunFile, validationError } from '../run-file.js';
import type { RunFileLimits } from '../run-file.js';

/**
 * A template is stored in its `ScheduleCreated` event, itself one message: this keeps it well
 * under the server's 1 MiB. A larger run belongs in a run file submitted by a job of yours.
 */
export const MAX_TEMPLATE_BYTES = 256 * 1024;

/** Stands in for the runId while the template is checked: any valid id would do. */
const PLACEHOLDER_RUN_ID = 'schedule-template';

/**
 * The template parsed as a run file (defaults filled in, so that every fire submits the same
 * file and a cut-short submit is finished by the next leader, same hash).
 * @throws ValidationError listing every problem, paths under `run`.
 */
export function parseRunTemplate(raw: unknown, limits: RunFileLimits): RunTemplate {
  const issues: Issue[] = [];
  const record = typeof raw === 'object' && raw !== null && !Array.isArray(raw);
  if (!record)
    issues.push({ path: 'run', message: 'must be an object (a run file without runId)' });
  else if ('runId' in raw) {
    issues.push({
      path: 'run.runId',
      message: 'is set by each fire: leave it out of the template',
    });
  } else {
    const bytes = Buffer.byteLength(JSON.stringify(raw), 'utf8');
    if (bytes > MAX_TEMPLATE_BYTES) {
      issues.push({
        path: 'run',
        message: `is ${bytes} bytes of JSON, over ${MAX_TEMPLATE_BYTES}: a schedule's run must be smaller`,
      });
    }
  }
  if (issues.length > 0) throw validationError('schedule', issues);
  try {
    const { runId: _runId, ...template } = validateRunFile(
      { ...(raw as object), runId: PLACEHOLDER_RUN_ID },
      limits,
    );
    return template;
  } catch (err: unknown) {
    if (err instanceof ValidationError) {
      const under = err.issues.map((i) => ({ ...i, path: `run.${i.path}` }));
      throw validationError('schedule', under);
    }
    throw err;
  }
}

/** The run file one fire submits. */
export const runFileOf = (runId: string, template: RunTemplate): RunFile =>
  ({ runId, ...template }) as unknown as ParsedRunFile;
