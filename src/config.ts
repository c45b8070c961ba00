/**
 * Sonar's configuration (DESIGN.md §9): one zod schema over the `SONAR_*` environment
 * variables, with CLI flags on top. Durations and sizes resolve to milliseconds and bytes.
 *
 * A bad value is refused with the variable's name and the value:
 * `SONAR_PULSE_INTERVAL: "5x" is not a duration (e.g. 5s)`.
 *
 * @module
 */
import { delimiter } from 'node:path';
import { z } from 'zod';
import { ErrorCode, SonarError } from '../actors/errors.js';
import { SETTINGS } from './config-table.js';
import type { ConfigVariable, DefaultedRow, ParsedSetting, SettingRow } from './config-table.js';
import type { Parser, Raw } from './config-parsers.js';
import { formatDuration } from './duration.js';
import { maskResultsUrl } from './storage/postgres/pg-url.js';

/** A row of the settings table, of any variable. */
type Row = (typeof SETTINGS)[ConfigVariable];

/** The field a row names at the top of {@link SonarConfig}; `never` for a group's (`s3.bucket`). */
type TopField<R extends Row> = R['field'] extends `${string}.${string}` ? never : R['field'];

/** The type a row's parser gives. */
type Parsed<R extends Row> = ReturnType<R['parse']>;

/** One object type out of an intersection, so it reads as one in hovers and errors. */
type Flat<T> = { [K in keyof T]: T[K] };

/**
 * Where outputs go when `SONAR_S3_*` is set (otherwise the `sonar_outputs` object store): the
 * `s3.*` rows, each field always there, as all four are set or none.
 */
export type S3Config = {
  [R in Row as R['field'] extends `s3.${infer K}` ? K : never]: Parsed<R>;
};

/**
 * The resolved configuration: durations in ms, sizes in bytes. Derived from the settings
 * table (docs/configuration.md says what each field does): a row with a default is a field
 * always there, one without is an optional field, both of the type the row's parser gives;
 * the `s3.*` rows are `s3`, whole or absent.
 */
export type SonarConfig = Flat<
  { [R in Row as R extends DefaultedRow<unknown> ? TopField<R> : never]: Parsed<R> } & {
    [R in Row as R extends DefaultedRow<unknown> ? never : TopField<R>]?: Parsed<R>;
  } & { s3?: S3Config }
>;

/** A configuration value was refused. The message names the variable and the value. */
export class ConfigError extends SonarError {
  override readonly name = 'ConfigError';
  /** Every problem found; {@link ConfigError.variable} and `value` are the first one's. */
  readonly problems: readonly ConfigProblem[];
  /** The environment variable, e.g. `SONAR_PULSE_INTERVAL`. */
  readonly variable: string;
  /** The value refused (`undefined` when a required companion variable is missing). */
  readonly value: string | number | undefined;

  constructor(problems: readonly [ConfigProblem, ...ConfigProblem[]], options?: ErrorOptions) {
    super(
      ErrorCode.Validation,
      problems.map((p) => `${p.variable}: ${p.message}`).join('; '),
      { variable: problems[0].variable, problems: problems.map((p) => p.message) },
      options,
    );
    this.problems = problems;
    this.variable = problems[0].variable;
    this.value = problems[0].value;
  }
}

/** One refused value. */
export interface ConfigProblem {
  variable: string;
  value: string | number | undefined;
  /** Without the variable's name, e.g. `"5x" is not a duration (e.g. 5s)`. */
  message: string;
}

export const isConfigError = (err: unknown): err is ConfigError => err instanceof ConfigError;

/** Every setting's default, by variable (only those that have one). */
export const configDefaults = Object.fromEntries(
  Object.entries(SETTINGS).flatMap(([v, row]) =>
    row.default === undefined ? [] : [[v, row.default]],
  ),
) as {
  readonly [
    V in ConfigVariable as (typeof SETTINGS)[V] extends DefaultedRow<unknown> ? V : never
  ]: string;
};

/** Empty strings count as unset, so `SONAR_HTTP_PORT=` turns the port off. */
function given(value: Raw | undefined): Raw | undefined {
  return typeof value === 'string' && value.trim() === '' ? undefined : value;
}

function run<T>(ctx: z.RefinementCtx, parse: Parser<T>, raw: Raw): T {
  try {
    return parse(raw);
  } catch (err: unknown) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
}

const rawValue = z.union([z.string(), z.number()]).optional();

function setting<T>(fallback: string, parse: Parser<T>) {
  return rawValue.transform((value, ctx): T => run(ctx, parse, given(value) ?? fallback));
}

function optionalSetting<T>(parse: Parser<T>) {
  return rawValue.transform((value, ctx): T | undefined => {
    const raw = given(value);
    return raw === undefined ? undefined : run(ctx, parse, raw);
  });
}

/** The `s3.*` rows: all four set, or none. */
const S3_VARIABLES = (Object.keys(SETTINGS) as ConfigVariable[]).filter((v) =>
  SETTINGS[v].field.startsWith('s3.'),
);

/** The zod field of each setting: its default applied, then its parser. */
const settingShape = Object.fromEntries(
  Object.entries(SETTINGS).map(([v, row]: [string, SettingRow<unknown>]) => [
    v,
    row.default === undefined ? optionalSetting(row.parse) : setting(row.default, row.parse),
  ]),
) as unknown as {
  [V in ConfigVariable]: z.ZodType<ParsedSetting<(typeof SETTINGS)[V]>, Raw | undefined>;
};

/**
 * The schema over the environment. Input: an env-like record (unknown keys are ignored; values
 * may be numbers, as CLI flags are); output: {@link SonarConfig}. Prefer {@link loadConfig},
 * which turns failures into a {@link ConfigError}.
 */
export const sonarEnvSchema = z.object(settingShape).transform((env, ctx): SonarConfig => {
  const problem = (variable: string, message: string): void => {
    ctx.addIssue({ code: 'custom', message, path: [variable] });
  };
  // Workers would look dead between two pulses.
  if (env.SONAR_PULSE_TTL <= env.SONAR_PULSE_INTERVAL) {
    problem(
      'SONAR_PULSE_TTL',
      `"${formatDuration(env.SONAR_PULSE_TTL)}" must be more than SONAR_PULSE_INTERVAL (${formatDuration(env.SONAR_PULSE_INTERVAL)})`,
    );
  }
  // The leader renews its lock every tick; a shorter TTL would lose it between renewals.
  if (env.SONAR_LOCK_TTL <= env.SONAR_TICK) {
    problem(
      'SONAR_LOCK_TTL',
      `"${formatDuration(env.SONAR_LOCK_TTL)}" must be more than SONAR_TICK (${formatDuration(env.SONAR_TICK)})`,
    );
  }
  // A certificate is useless without its key, and the reverse: refuse half a pair.
  if ((env.SONAR_NATS_TLS_CERT === undefined) !== (env.SONAR_NATS_TLS_KEY === undefined)) {
    const [missing, given] =
      env.SONAR_NATS_TLS_CERT === undefined
        ? ['SONAR_NATS_TLS_CERT', 'SONAR_NATS_TLS_KEY']
        : ['SONAR_NATS_TLS_KEY', 'SONAR_NATS_TLS_CERT'];
    problem(missing, `unset, but ${given} is set (set both for mutual TLS, or neither)`);
  }
  const s3Set = S3_VARIABLES.filter((v) => env[v] !== undefined);
  const s3Missing = S3_VARIABLES.filter((v) => env[v] === undefined);
  if (s3Set.length > 0 && s3Missing[0] !== undefined) {
    problem(
      s3Missing[0],
      `unset, but ${s3Set.join(', ')} ${s3Set.length > 1 ? 'are' : 'is'} set (set all four SONAR_S3_* or none)`,
    );
  }
  const {
    SONAR_S3_ENDPOINT: endpoint,
    SONAR_S3_BUCKET: bucket,
    SONAR_S3_ACCESS_KEY: accessKey,
    SONAR_S3_SECRET_KEY: secretKey,
  } = env;
  const s3 =
    endpoint !== undefined &&
    bucket !== undefined &&
    accessKey !== undefined &&
    secretKey !== undefined
      ? { endpoint, bucket, accessKey, secretKey }
      : undefined;
  // Every field but those of `s3`, which is whole or absent (checked above).
  const fields = Object.fromEntries(
    configVariables
      .filter((v) => !SETTINGS[v].field.includes('.'))
      .map((v) => [SETTINGS[v].field, env[v]]),
  );
  return dropUndefined({ ...fields, s3 } as SonarConfig);
});

/** Optional fields are absent rather than `undefined`, so `'httpPort' in config` means set. */
function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

export type { ConfigVariable } from './config-table.js';

/** Every `SONAR_*` variable, in DESIGN.md §9 order. */
export const configVariables = Object.keys(SETTINGS) as ConfigVariable[];

/**
 * The CLI flag of a variable: `SONAR_PULSE_INTERVAL` → `pulse-interval` (so
 * `--pulse-interval 5s`; commander hands it back as `pulseInterval`).
 */
export function configFlag(variable: ConfigVariable): string {
  return variable.slice('SONAR_'.length).toLowerCase().replaceAll('_', '-');
}

const camel = (flag: string): string =>
  flag.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/** Override keys: the variable, its field (`pulseIntervalMs`, `s3.bucket`) or its flag in camelCase (`pulseInterval`). */
const OVERRIDE_KEYS = new Map<string, ConfigVariable>(
  configVariables.flatMap((v) => [
    [v, v],
    [SETTINGS[v].field, v],
    [camel(configFlag(v)), v],
  ]),
);

/**
 * Reads the configuration from `env`, then applies `overrides` (CLI flags) on top.
 *
 * Override keys may be the variable (`SONAR_PULSE_INTERVAL`), the config field
 * (`pulseIntervalMs`) or the flag in camelCase (`pulseInterval`, as commander returns it);
 * other keys and `undefined` values are ignored, so commander's whole `opts()` can be passed.
 * Numbers mean milliseconds or bytes.
 *
 * @throws ConfigError naming the first bad variable and its value, e.g.
 * `SONAR_PULSE_INTERVAL: "5x" is not a duration (e.g. 5s)`.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
  overrides: Readonly<Partial<Record<string, string | number | boolean>>> = {},
): SonarConfig {
  const input: Partial<Record<ConfigVariable, Raw>> = {};
  for (const v of configVariables) {
    const value = env[v];
    if (value !== undefined) input[v] = value;
  }
  for (const [key, value] of Object.entries(overrides)) {
    const v = OVERRIDE_KEYS.get(key);
    // A switch (`--strict-durability`) comes from commander as `true`.
    if (v !== undefined && value !== undefined) {
      input[v] = typeof value === 'boolean' ? String(value) : value;
    }
  }
  const parsed = sonarEnvSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue): ConfigProblem => {
    const variable = String(issue.path[0] ?? 'SONAR');
    const given =
      input[variable as ConfigVariable] ??
      (configDefaults as Partial<Record<string, string>>)[variable];
    const mask = (SETTINGS as Partial<Record<string, SettingRow<unknown>>>)[variable]?.mask;
    const value = mask && given !== undefined ? mask(String(given)) : given;
    return { variable, value, message: issue.message };
  });
  const [first, ...rest] = problems;
  if (first === undefined)
    throw new ConfigError([{ variable: 'SONAR', value: undefined, message: parsed.error.message }]);
  throw new ConfigError([first, ...rest]);
}

/** A copy safe to log: passwords, secret keys and the HTTP token replaced by `***`. */
export function redactConfig(config: SonarConfig): SonarConfig {
  return {
    ...config,
    ...(config.natsPassword !== undefined && { natsPassword: '***' }),
    ...(config.httpToken !== undefined && { httpToken: '***' }),
    ...(config.s3 !== undefined && { s3: { ...config.s3, secretKey: '***' } }),
    ...(config.resultsUrl !== undefined && { resultsUrl: maskResultsUrl(config.resultsUrl) }),
  };
}

/**
 * The process's own settings: its environment, with `overrides` (CLI flags) on top. The
 * configuration module is the only one in `src/` that reads `process.env` (lint), so what a
 * process reads of its environment is all listed here.
 */
export function loadProcessConfig(
  overrides: Readonly<Partial<Record<string, string | number | boolean>>> = {},
): SonarConfig {
  return loadConfig(process.env, overrides);
}

/**
 * One setting of the process's environment, parsed by its row of the table, for what runs
 * before or without a whole configuration (the logger's level in a CLI verb or the worker
 * SDK). Unset (or empty): its default, or undefined.
 *
 * @throws ConfigError naming the variable and its value, as {@link loadConfig} does.
 */
export function loadProcessSetting<V extends ConfigVariable>(
  variable: V,
): ParsedSetting<(typeof SETTINGS)[V]> {
  const row: SettingRow<unknown> = SETTINGS[variable];
  const raw = given(process.env[variable]) ?? row.default;
  if (raw === undefined) return undefined as ParsedSetting<(typeof SETTINGS)[V]>;
  try {
    return row.parse(raw) as ParsedSetting<(typeof SETTINGS)[V]>;
  } catch (err: unknown) {
    const value = row.mask ? row.mask(String(raw)) : raw;
    const message = err instanceof Error ? err.message : String(err);
    throw new ConfigError([{ variable, value, message }], { cause: err });
  }
}

/** The raw environment variables read outside the `SONAR_*` table, each for one reason. */
export const processEnvironment = {
  /** `SONAR_DEBUG`: any non-empty value prints a failed verb's stack trace. */
  debug: (): boolean => Boolean(process.env['SONAR_DEBUG']),
  /** `NO_COLOR` (no-color.org): any non-empty value turns the terminal's colours off. */
  noColor: (): boolean => Boolean(process.env['NO_COLOR']),
  /**
   * `OTEL_TRACES_EXPORTER` and `OTEL_SDK_DISABLED`: whether a `sonar` process starts the
   * OpenTelemetry SDK (src/tracing/sdk.ts). The SDK reads the other `OTEL_*` variables itself.
   */
  tracing: () => ({
    tracesExporter: process.env['OTEL_TRACES_EXPORTER'],
    sdkDisabled: process.env['OTEL_SDK_DISABLED'],
  }),
  /** `NATS_SERVER_BIN`: the nats-server binary `sonar dev` starts. */
  natsServerBin: (): string | undefined => process.env['NATS_SERVER_BIN'],
  /** `PATH`, as the directories it lists. */
  searchPath: (): string[] => (process.env['PATH'] ?? '').split(delimiter),
  /** What a child process inherits: this environment with `extra` on top. */
  forChild: (extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    ...extra,
  }),
};
