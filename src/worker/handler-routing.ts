import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ErrorCode, SonarError, ValidationError } from '../../actors/errors.js';
import { NonRetryableError } from './errors.js';
import type { HandlerContext, StepHandler, TaskHandler } from './options.js';

/** `input.size` for a path of `['size']`; `input` for the input itself. */
function pathOf(path: StandardSchemaV1.Issue['path']): string {
  let out = 'input';
  for (const p of path ?? []) {
    const key = typeof p === 'object' ? p.key : p;
    out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  }
  return out;
}

/**
 * Wraps `handler` so that it runs only on an input `schema` accepts, and gets the schema's
 * output (coerced, defaulted). A refused input fails the attempt for good, naming each field:
 * the same input would be refused on every retry.
 */
export function validatingInput<I, O>(
  schema: StandardSchemaV1<unknown, I>,
  handler: TaskHandler<I, O>,
): TaskHandler<unknown, O> {
  return async (input, ctx) => {
    const checked = await schema['~standard'].validate(input);
    if (checked.issues) {
      const problems = checked.issues.map((i) => `${pathOf(i.path)}: ${i.message}`);
      throw new NonRetryableError(`input refused by the worker's schema: ${problems.join('; ')}`);
    }
    return handler(checked.value, ctx);
  };
}

const refused = (path: string, message: string): ValidationError =>
  new ValidationError(`'${path}' ${message}`, [{ path, message }]);

const handlerOf = (h: StepHandler): TaskHandler => {
  // A step handler takes `never` so that any handler fits the record; it runs on `unknown`.
  if (typeof h === 'function') return h as TaskHandler;
  const run = h.handler as TaskHandler;
  return h.schema ? validatingInput(h.schema as StandardSchemaV1<unknown, unknown>, run) : run;
};

/**
 * A step handler whose input type comes from its schema:
 * `handlers: { resize: step({ schema: z.object({ size: z.number() }), handler: ({ size }) => ... }) }`.
 */
export function step<I, O>(h: {
  schema: StandardSchemaV1<unknown, I>;
  handler: TaskHandler<I, O>;
}): StepHandler {
  return h as unknown as StepHandler;
}

/**
 * One handler for the worker: `handler` (validated by `schema` when given) for every task, or
 * `handlers[stepId]` by the task's step.
 *
 * @throws ValidationError unless exactly one of `handler` and `handlers` is given, or when
 *   `handlers` is empty or `schema` comes with `handlers` (each step names its own).
 */
export function routeHandler(opts: {
  handler?: TaskHandler<never, unknown> | undefined;
  schema?: StandardSchemaV1<unknown, unknown> | undefined;
  handlers?: Readonly<Record<string, StepHandler>> | undefined;
}): TaskHandler {
  const { handler, schema, handlers } = opts;
  if ((handler === undefined) === (handlers === undefined)) {
    throw refused(
      'handler',
      'give `handler` (one for every task) or `handlers` (one per step id), not both or neither',
    );
  }
  if (handler !== undefined) {
    const one = handler as TaskHandler;
    return schema ? validatingInput(schema, one) : one;
  }
  if (schema !== undefined) {
    throw refused('schema', 'with `handlers`, give each step its own `{ schema, handler }`');
  }
  const byStep = new Map(Object.entries(handlers!).map(([id, h]) => [id, handlerOf(h)]));
  if (byStep.size === 0) throw refused('handlers', 'needs at least one step id');
  const known = [...byStep.keys()].join(', ');
  return (input: unknown, ctx: HandlerContext) => {
    const h = byStep.get(ctx.stepId);
    // Retryable: another worker on the tag (a newer one, in a fleet being upgraded) may have it.
    if (!h)
      throw new SonarError(
        ErrorCode.NotFound,
        `no handler for step ${ctx.stepId} on this worker (it has: ${known})`,
      );
    return h(input, ctx);
  };
}
