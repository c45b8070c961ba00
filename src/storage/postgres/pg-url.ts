/**
 * `SONAR_RESULTS_URL`: the PostgreSQL connection string of the results sink, checked before
 * anything connects, and shown only with its password masked.
 */
import { ValidationError } from '../../../actors/errors.js';

/** The schemes libpq (and node-postgres) accept for a connection URI. */
const SCHEMES = new Set(['postgres:', 'postgresql:']);

/** libpq's sslmode values, plus node-postgres's `no-verify` (TLS without checking the peer). */
export const SSL_MODES = [
  'disable',
  'allow',
  'prefer',
  'require',
  'verify-ca',
  'verify-full',
  'no-verify',
] as const;

/** Query parameters libpq reads as secrets: `?password=` is as good as `user:password@`. */
const SECRET_PARAMS = ['password', 'sslpassword'] as const;

/**
 * The URL with its password replaced by `***`, for every message and log line that shows it:
 * the `user:password@` part and the `password` and `sslpassword` parameters. A value that
 * does not even parse is masked by its shape (everything between `scheme://user:` and the
 * last `@` before the path, and every `password=` parameter), so a typo never prints the
 * password either.
 */
export function maskResultsUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (_err: unknown) {
    return raw
      .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^/]*@/i, '$1***@')
      .replace(/([?&](?:ssl)?password=)[^&#]*/gi, '$1***');
  }
  const secrets = SECRET_PARAMS.filter((name) => url.searchParams.has(name));
  if (url.password === '' && secrets.length === 0) return raw;
  if (url.password !== '') url.password = '***';
  for (const name of secrets) url.searchParams.set(name, '***');
  return url.toString();
}

/**
 * Checks a results URL: `postgres://` or `postgresql://`, a host, and an sslmode libpq
 * knows, if one is given. Returns the URL as given (node-postgres reads sslmode and the other
 * parameters from it); throws a message that shows it masked.
 */
export function parseResultsUrl(raw: string | number): string {
  const value = String(raw).trim();
  const shown = JSON.stringify(maskResultsUrl(value));
  let url: URL;
  try {
    url = new URL(value);
  } catch (_err: unknown) {
    throw new ValidationError(
      `${shown} is not a PostgreSQL URL (e.g. postgres://sonar@db:5432/sonar)`,
    );
  }
  if (!SCHEMES.has(url.protocol)) {
    throw new ValidationError(
      `${shown} is not a PostgreSQL URL: the scheme must be postgres:// or postgresql:// (e.g. postgres://sonar@db:5432/sonar)`,
    );
  }
  if (url.hostname === '' && !url.searchParams.has('host')) {
    throw new ValidationError(`${shown} names no host (e.g. postgres://sonar@db:5432/sonar)`);
  }
  const sslmode = url.searchParams.get('sslmode');
  if (sslmode !== null && !(SSL_MODES as readonly string[]).includes(sslmode)) {
    throw new ValidationError(
      `${shown}: sslmode "${sslmode}" is not one of ${SSL_MODES.join(', ')}`,
    );
  }
  return value;
}
