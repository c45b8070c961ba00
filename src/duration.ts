/**
 * Durations and sizes as operators write them (DESIGN.md §9): `250ms`, `5s`, `10m`, `72h`,
 * `30d`; `100B`, `512KiB`, `64MiB`, `1GiB`. A plain number is milliseconds or bytes.
 *
 * @module
 */

const DURATION_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type DurationUnit = keyof typeof DURATION_UNITS;

const SIZE_UNITS = {
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
} as const;
type SizeUnit = keyof typeof SIZE_UNITS;

const NUMBER = String.raw`\d+(?:\.\d+)?|\.\d+`;
const PLAIN_NUMBER = new RegExp(`^(?:${NUMBER})$`);
/** One `<number><unit>` part; a duration may chain parts, largest first (`1h30m`). */
const DURATION_PART = new RegExp(`\\s*(${NUMBER})\\s*(ms|s|m|h|d)`, 'y');
const SIZE = new RegExp(`^(${NUMBER})\\s*(b|kib|mib|gib|tib)$`, 'i');

function notA(kind: string, text: string | number, example: string): Error {
  return new Error(`${JSON.stringify(text)} is not a ${kind} (e.g. ${example})`);
}

function fromNumber(value: number, kind: string, example: string): number {
  if (!Number.isFinite(value) || value < 0) throw notA(kind, value, example);
  return Math.round(value);
}

/**
 * Parses a duration into milliseconds.
 *
 * Accepts `250ms`, `5s`, `10m`, `72h`, `30d`, decimals (`1.5s`), chained parts
 * (`1h30m`, as {@link formatDuration} writes them) and plain numbers, which are milliseconds.
 *
 * @throws Error `"5x" is not a duration (e.g. 5s)` for anything else, including negatives.
 */
export function parseDuration(text: string | number): number {
  if (typeof text === 'number') return fromNumber(text, 'duration', '5s');
  const trimmed = text.trim();
  if (PLAIN_NUMBER.test(trimmed)) return fromNumber(Number(trimmed), 'duration', '5s');
  let total = 0;
  let at = 0;
  let previous = Infinity;
  while (at < trimmed.length) {
    DURATION_PART.lastIndex = at;
    const match = DURATION_PART.exec(trimmed);
    const unit = match?.[2] as DurationUnit | undefined;
    if (!match || unit === undefined) throw notA('duration', text, '5s');
    const size = DURATION_UNITS[unit];
    // Parts go largest first, each unit once: `1h30m`, not `30m1h` or `1m1m`.
    if (size >= previous) throw notA('duration', text, '5s');
    previous = size;
    total += Number(match[1]) * size;
    at = DURATION_PART.lastIndex;
  }
  if (at === 0) throw notA('duration', text, '5s');
  return fromNumber(total, 'duration', '5s');
}

/**
 * Parses a size into bytes.
 *
 * Accepts `100B`, `512KiB`, `64MiB`, `1GiB`, `1TiB` (units are powers of 1024, any case),
 * decimals (`1.5MiB`) and plain numbers, which are bytes. `MB`-style units are refused
 * rather than guessed.
 *
 * @throws Error `"64MB" is not a size (e.g. 64MiB)` for anything else.
 */
export function parseSize(text: string | number): number {
  if (typeof text === 'number') return fromNumber(text, 'size', '64MiB');
  const trimmed = text.trim();
  if (PLAIN_NUMBER.test(trimmed)) return fromNumber(Number(trimmed), 'size', '64MiB');
  const match = SIZE.exec(trimmed);
  const unit = match?.[2]?.toLowerCase() as SizeUnit | undefined;
  if (!match || unit === undefined) throw notA('size', text, '64MiB');
  return fromNumber(Number(match[1]) * SIZE_UNITS[unit], 'size', '64MiB');
}

/**
 * Writes milliseconds the way {@link parseDuration} reads them, exactly, largest unit first:
 * `2000` → `2s`, `5400000` → `1h30m`, `1500` → `1s500ms`, `0` → `0ms`.
 * Fractions of a millisecond are rounded; negatives get a leading `-`.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return '0ms';
  let out = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const size = DURATION_UNITS[unit];
    const count = Math.floor(rest / size);
    if (count > 0) {
      out += `${count}${unit}`;
      rest -= count * size;
    }
  }
  return ms < 0 ? `-${out}` : out;
}

/**
 * Writes bytes with the largest power-of-1024 unit that divides them exactly, so that
 * {@link parseSize} reads the result back to the same number: `67108864` → `64MiB`,
 * `262144` → `256KiB`, `1536` → `1536B`.
 */
export function formatSize(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const whole = Math.round(bytes);
  for (const [unit, label] of [
    ['tib', 'TiB'],
    ['gib', 'GiB'],
    ['mib', 'MiB'],
    ['kib', 'KiB'],
  ] as const) {
    const size = SIZE_UNITS[unit];
    if (whole !== 0 && whole % size === 0) return `${whole / size}${label}`;
  }
  return `${whole}B`;
}
