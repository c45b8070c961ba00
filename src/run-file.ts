/**
 * Run-file validation (DESIGN.md section 8), shared by the client (before anything is sent)
 * and the backend (before anything is written): a bad file is refused whole, with every
 * problem listed in the `'<path>' <problem>` form.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { issuesOf, listIssues, ValidationError } from '../actors/errors.js';
import type { Issue } from '../actors/errors.js';
import { nestsDeeperThan } from './json-depth.js';
import { inputBytes, inputSizeProblem, MAX_INPUT_DEPTH } from './limits.js';
import { runFileSchema } from './protocol.js';
import { placementIssues } from './run-file-placement.js';
import type { ParsedRunFile } from './protocol.js';

/** The limits a run file is checked against. */
export interface RunFileLimits {
  /** `SONAR_MAX_INPUT` in bytes: a task input's JSON may not be larger (`Infinity`: unchecked). */
  maxInputBytes: number;
}

/** A ValidationError listing every issue, the message naming each path and problem. */
export function validationError(what: string, issues: Issue[]): ValidationError {
  const { text, listed } = listIssues(issues);
  const count = issues.length === 1 ? '1 problem' : `${issues.length} problems`;
  return new ValidationError(`${what} refused (${count}): ${text}`, listed);
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Steps as far as the graph checks need them; anything malformed is skipped here. */
interface StepNode {
  id: string;
  after: string[];
  index: number;
}

function nodesOf(steps: unknown): StepNode[] {
  if (!Array.isArray(steps)) return [];
  return steps.flatMap((s: unknown, index) => {
    if (!isRecord(s) || typeof s['id'] !== 'string') return [];
    const after = Array.isArray(s['after'])
      ? s['after'].filter((a): a is string => typeof a === 'string')
      : [];
    return [{ id: s['id'], after, index }];
  });
}

/**
 * The problems of the step graph: duplicate step ids, `after` naming an unknown step (or the
 * step itself), and cycles (each reported once, as `a -> b -> a`).
 */
export function stepGraphIssues(steps: unknown, path = 'steps'): Issue[] {
  const nodes = nodesOf(steps);
  const issues: Issue[] = [];
  const byId = new Map<string, StepNode>();
  for (const node of nodes) {
    const first = byId.get(node.id);
    if (first) {
      issues.push({
        path: `${path}.${node.index}.id`,
        message: `duplicate step id ${JSON.stringify(node.id)} (also ${path}.${first.index})`,
      });
    } else byId.set(node.id, node);
  }
  for (const node of nodes) {
    node.after.forEach((dep, i) => {
      if (dep === node.id) {
        issues.push({
          path: `${path}.${node.index}.after.${i}`,
          message: 'a step cannot follow itself',
        });
      } else if (!byId.has(dep)) {
        issues.push({
          path: `${path}.${node.index}.after.${i}`,
          message: `names unknown step ${JSON.stringify(dep)}`,
        });
      }
    });
  }
  return issues.concat(cycleIssues(byId, path));
}

/** At most this many cycles are reported: each costs a walk of its path, and one is enough. */
const MAX_CYCLES_REPORTED = 10;
/** A longer cycle is shown by its ends: a message naming thousands of steps helps nobody. */
const MAX_CYCLE_SHOWN = 12;

/**
 * Each cycle in `after`, reported once, as `a -> b -> a`. Depth-first search with colours (a
 * grey node met again closes a cycle) on an explicit stack, not by recursion: a run file
 * may chain tens of thousands of steps, which would overflow the call stack.
 */
function cycleIssues(byId: ReadonlyMap<string, StepNode>, path: string): Issue[] {
  const issues: Issue[] = [];
  const black = new Set<string>();
  /** Grey nodes: those on the current path, with their place in it. */
  const onPath = new Map<string, number>();
  const reported = new Set<string>();
  const frames: { id: string; after: readonly string[]; next: number }[] = [];
  const enter = (id: string): void => {
    onPath.set(id, frames.length);
    frames.push({ id, after: byId.get(id)?.after ?? [], next: 0 });
  };
  for (const root of byId.keys()) {
    if (black.has(root)) continue;
    enter(root);
    while (frames.length > 0) {
      const top = frames[frames.length - 1]!;
      if (top.next >= top.after.length) {
        frames.pop();
        onPath.delete(top.id);
        black.add(top.id);
        continue;
      }
      const dep = top.after[top.next++]!;
      if (dep === top.id || !byId.has(dep) || black.has(dep)) continue;
      const at = onPath.get(dep);
      if (at === undefined) enter(dep);
      else if (reported.size < MAX_CYCLES_REPORTED) {
        const cycle = frames.slice(at).map((f) => f.id);
        const key = [...cycle].sort().join(',');
        if (!reported.has(key)) {
          reported.add(key);
          issues.push({ path, message: `cycle in 'after': ${showCycle(cycle)}` });
        }
      }
    }
  }
  return issues;
}

function showCycle(cycle: readonly string[]): string {
  const closed = [...cycle, cycle[0]!];
  if (closed.length <= MAX_CYCLE_SHOWN) return closed.join(' -> ');
  const half = MAX_CYCLE_SHOWN / 2;
  const hidden = closed.length - MAX_CYCLE_SHOWN;
  return [...closed.slice(0, half), `... (${hidden} more steps)`, ...closed.slice(-half)].join(
    ' -> ',
  );
}

/**
 * The problems of a list of tasks beyond their schema: a task id already used in the run
 * (`seen` maps ids to where they were first seen, across steps) and inputs over
 * SONAR_MAX_INPUT. An input nested too deep (the schema reports it) is not sized: sizing
 * serializes it, which would overflow the stack.
 */
export function taskIssues(
  tasks: unknown,
  path: string,
  limits: RunFileLimits,
  seen: Map<string, string> = new Map(),
): Issue[] {
  if (!Array.isArray(tasks)) return [];
  const issues: Issue[] = [];
  tasks.forEach((t: unknown, i) => {
    if (!isRecord(t)) return;
    const here = `${path}.${i}`;
    pushAll(issues, placementIssues(t, here));
    if (typeof t['id'] === 'string') {
      const first = seen.get(t['id']);
      if (first !== undefined) {
        issues.push({
          path: `${here}.id`,
          message: `duplicate task id ${JSON.stringify(t['id'])} (also ${first})`,
        });
      } else seen.set(t['id'], here);
    }
    if (limits.maxInputBytes === Infinity) return;
    if (nestsDeeperThan(t['input'], MAX_INPUT_DEPTH)) return;
    const problem = inputSizeProblem(inputBytes(t['input']), limits.maxInputBytes);
    if (problem !== null) issues.push({ path: `${here}.input`, message: problem });
  });
  return issues;
}

/**
 * Validates a whole run file: its schema (unknown fields, bad ids, no tags, ...), the step
 * graph, task ids unique in the run, and input sizes. Every problem is listed.
 *
 * @returns the parsed file, defaults filled in.
 * @throws ValidationError with `issues` listing every problem; nothing is sent or written.
 */
export function validateRunFile(raw: unknown, limits: RunFileLimits): ParsedRunFile {
  const parsed = runFileSchema.safeParse(raw);
  const issues: Issue[] = parsed.success ? [] : issuesOf(parsed.error);
  // The cross-field checks read the raw file too, so that a bad id and a cycle are both listed.
  const steps = isRecord(raw) ? raw['steps'] : undefined;
  pushAll(issues, stepGraphIssues(steps));
  const seen = new Map<string, string>();
  if (Array.isArray(steps)) {
    steps.forEach((s: unknown, i) => {
      if (!isRecord(s)) return;
      pushAll(issues, placementIssues(s, `steps.${i}`));
      pushAll(issues, taskIssues(s['tasks'], `steps.${i}.tasks`, limits, seen));
    });
  }
  if (!parsed.success || issues.length > 0) throw validationError('run file', issues);
  return parsed.data;
}

/** A loop, not `push(...from)`: a spread of some 100k issues overflows the stack. */
function pushAll<T>(into: T[], from: readonly T[]): void {
  for (const x of from) into.push(x);
}

/** JSON with object keys sorted, so that equal values always serialize the same. */
export function canonicalJson(value: unknown): string {
  // Hand-rolled rather than a JSON.stringify replacer: no copy of every object (hashing a
  // 20k-task run file is on the submit path).
  if (Array.isArray(value)) {
    return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  }
  if (isRecord(value)) {
    if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      return canonicalJson(JSON.parse(JSON.stringify(value)));
    }
    const parts: string[] = [];
    for (const k of Object.keys(value).sort()) {
      const v = value[k];
      if (v !== undefined) parts.push(`${JSON.stringify(k)}:${canonicalJson(v)}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The hash `submit.begin` carries: sha256 (hex) of the parsed file's JSON. Parsing puts every
 * known field in schema order and fills defaults, so the same file always hashes the same
 * (a task's `input` keeps its own key order); any change of content does not.
 */
export const runFileHash = (file: ParsedRunFile): string =>
  // Plain JSON.stringify, not canonicalJson: much faster on a large file, and equal here.
  createHash('sha256').update(JSON.stringify(file)).digest('hex');
