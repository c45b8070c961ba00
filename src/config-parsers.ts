/**
 * The parsers of setting values: each turns a raw value (an environment string, or a number
 * given in code or by a flag) into the setting's, or throws naming the value.
 */
import { PREFIX_RE } from '../streams/names.js';
import { parseDuration, parseSize } from './duration.js';
import { parseTagRates } from '../actors/reconciler/tag-rates.js';
import type { TagRates } from '../actors/reconciler/tag-rates.js';
import { ValidationError } from '../actors/errors.js';

/** A setting's value as given: an environment string, or a number from code or a flag. */
export type Raw = string | number;
/** Turns a given value into the setting's, or throws an Error whose message names the value. */
export type Parser<T> = (raw: Raw) => T;

const show = (raw: Raw): string => JSON.stringify(raw);

export const text: Parser<string> = (raw) => String(raw);

export function duration(min: 0 | 1): Parser<number> {
  return (raw) => {
    const ms = parseDuration(raw);
    if (ms < min) throw new ValidationError(`${show(raw)} must be more than 0 (e.g. 5s)`);
    return ms;
  };
}

export const size: Parser<number> = (raw) => {
  const bytes = parseSize(raw);
  if (bytes < 1) throw new ValidationError(`${show(raw)} must be more than 0 (e.g. 64MiB)`);
  return bytes;
};

export function integer(min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> {
  return (raw) => {
    const trimmed = String(raw).trim();
    if (!/^\d+$/.test(trimmed))
      throw new ValidationError(`${show(raw)} is not a whole number (e.g. ${min})`);
    const n = Number(trimmed);
    if (n < min) throw new ValidationError(`${show(raw)} must be at least ${min}`);
    if (n > max) throw new ValidationError(`${show(raw)} must be at most ${max}`);
    return n;
  };
}

export const sizeOrAuto: Parser<number | 'auto'> = (raw) => {
  if (String(raw).trim().toLowerCase() === 'auto') return 'auto';
  try {
    return size(raw);
  } catch {
    throw new ValidationError(`${show(raw)} is not a size or auto (e.g. 8GiB)`);
  }
};

/** `tag=rate` pairs, comma-separated (actors/reconciler/tag-rates.ts). */
export const tagRates: Parser<TagRates> = (raw) => parseTagRates(String(raw));

export const positiveNumber: Parser<number> = (raw) => {
  const trimmed = String(raw).trim();
  const n = Number(trimmed);
  if (trimmed === '' || !Number.isFinite(n))
    throw new ValidationError(`${show(raw)} is not a number (e.g. 1.5)`);
  if (n <= 0) throw new ValidationError(`${show(raw)} must be more than 0`);
  return n;
};

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);
export const flag: Parser<boolean> = (raw) => {
  const value = String(raw).trim().toLowerCase();
  if (TRUE.has(value)) return true;
  if (FALSE.has(value)) return false;
  throw new ValidationError(`${show(raw)} is not a boolean (1, true, 0 or false)`);
};

export const flagOrAuto: Parser<boolean | 'auto'> = (raw) => {
  if (String(raw).trim().toLowerCase() === 'auto') return 'auto';
  try {
    return flag(raw);
  } catch {
    throw new ValidationError(`${show(raw)} is not auto, true or false`);
  }
};

/** Log levels, quietest last (pino's, and `silent`). */
export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

export const logLevel: Parser<LogLevel> = (raw) => {
  const value = String(raw).trim().toLowerCase();
  if (!(logLevels as readonly string[]).includes(value)) {
    throw new ValidationError(`${show(raw)} is not a log level (one of ${logLevels.join(', ')})`);
  }
  return value as LogLevel;
};

export const port: Parser<number> = (raw) => {
  const trimmed = String(raw).trim();
  const n = Number(trimmed);
  if (!/^\d+$/.test(trimmed) || n > 65535) {
    throw new ValidationError(`${show(raw)} is not a port (0 to 65535, e.g. 8080)`);
  }
  return n;
};

export const prefix: Parser<string> = (raw) => {
  const value = String(raw);
  if (!PREFIX_RE.test(value)) {
    throw new ValidationError(
      `${show(raw)} is not a prefix (lowercase letters, digits, _ or -, starting with a letter, at most 31 characters, e.g. sonar)`,
    );
  }
  return value;
};

const NATS_SCHEMES = new Set(['nats:', 'tls:', 'ws:', 'wss:']);
export const natsUrl: Parser<string> = (raw) => {
  const value = String(raw).trim();
  const ok = value.split(',').every((part) => {
    const server = part.trim();
    if (!server.includes('://')) return /^[^\s/:]+(:\d{1,5})?$/.test(server);
    try {
      const url = new URL(server);
      return NATS_SCHEMES.has(url.protocol) && url.hostname !== '';
    } catch (_err: unknown) {
      return false;
    }
  });
  if (!ok) throw new ValidationError(`${show(raw)} is not a NATS URL (e.g. nats://127.0.0.1:4222)`);
  return value;
};

export const httpUrl: Parser<string> = (raw) => {
  const value = String(raw).trim();
  let ok = false;
  try {
    const url = new URL(value);
    ok = (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch (_err: unknown) {
    ok = false;
  }
  if (!ok)
    throw new ValidationError(`${show(raw)} is not an http(s) URL (e.g. http://127.0.0.1:9000)`);
  return value.replace(/\/+$/, '');
};
