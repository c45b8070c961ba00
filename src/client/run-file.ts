/**
 * Run-file validation (DESIGN.md section 8), shared by the client (before anything is sent)
 * and the backend (before anything is written): a bad file is refused whole, with every
 * problem listed in the `'<path>' <problem>` form.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { ValidationError } from '../../actors/errors.js';
import type { Issue } from '../../actors/errors.js';
import { inputBytes, inputSizeProblem } from '../limits.js';
import { runFileSchema } from '../protocol.js';
import type { ParsedRunFile } from '../protocol.js';

/** The limits a run file is checked against. */
export interface RunFileLimits {
  /** `SONAR_MAX_INPUT` in bytes: a task input's JSON may not be larger (`Infinity`: unchecked). */
  maxInputBytes: number;
}

/** Maps zod issues to `{ path, message }`, paths joined with dots under `prefix`. */
export function issuesOfZod(error: z.ZodError, prefix: (string | number)[] = []): Issue[] {
  return error.issues.map((i) => ({
    path: [...prefix, ...i.path.map((p) => String(p))].join('.') || '(root)',
    message: i.message,
  }));
}

/** A ValidationError listing every issue, the message naming each path and problem. */
export function validationError(what: string, issues: Issue[]): ValidationError {
  const listed = issues.map((i) => `'${i.path}' ${i.message}`).join('; ');
  const count = issues.length === 1 ? '1 problem' : `${issues.length} problems`;
  return new ValidationError(`${what} refused (${count}): ${listed}`, issues);
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
  // Depth-first search with colours; a grey node met again closes a cycle.
  const colour = new Map<string, 'grey' | 'black'>();
  const stack: string[] = [];
  const reported = new Set<string>();
  const visit = (id: string): void => {
    colour.set(id, 'grey');
    stack.push(id);
    for (const dep of byId.get(id)?.after ?? []) {
      if (dep === id || !byId.has(dep)) continue;
      const c = colour.get(dep);
      if (c === 'grey') {
        const cycle = [...stack.slice(stack.indexOf(dep)), dep];
        const key = [...cycle.slice(0, -1)].sort().join(',');
        if (!reported.has(key)) {
          reported.add(key);
          issues.push({ path, message: `cycle in 'after': ${cycle.join(' -> ')}` });
        }
      } else if (c === undefined) visit(dep);
    }
    stack.pop();
    colour.set(id, 'black');
  };
  for (const id of byId.keys()) if (!colour.has(id)) visit(id);
  return issues;
}

/**
 * The problems of a list of tasks beyond their schema: a task id already used in the run
 * (`seen` maps ids to where they were first seen, across steps) and inputs over
 * SONAR_MAX_INPUT.
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
  const issues: Issue[] = parsed.success ? [] : issuesOfZod(parsed.error);
  // The cross-field checks read the raw file too, so that a bad id and a cycle are both listed.
  const steps = isRecord(raw) ? raw['steps'] : undefined;
  issues.push(...stepGraphIssues(steps));
  const seen = new Map<string, string>();
  if (Array.isArray(steps)) {
    steps.forEach((s: unknown, i) => {
      if (isRecord(s)) issues.push(...taskIssues(s['tasks'], `steps.${i}.tasks`, limits, seen));
    });
  }
  if (!parsed.success || issues.length > 0) throw validationError('run file', issues);
  return parsed.data;
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
  // Plain JSON.stringify, not canonicalJson: ~5x faster on a 20k-task file, and equal here.
  createHash('sha256').update(JSON.stringify(file)).digest('hex');
