import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, SonarError, isSonarError } from '../../../actors/errors.js';
import type { Html } from './html.js';

/**
 * Sent with every dashboard response. Scripts and styles only from this origin (no inline
 * script at all), no framing (clickjacking on the action buttons), no referrer leaking ids.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
} as const;

export function send(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(body);
}

export const sendJson = (res: ServerResponse, status: number, body: unknown): void =>
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(body));

export const sendHtml = (
  res: ServerResponse,
  status: number,
  body: Html,
  headers?: Record<string, string>,
): void => send(res, status, 'text/html; charset=utf-8', body.value, headers);

export function redirect(
  res: ServerResponse,
  location: string,
  headers: Record<string, string> = {},
) {
  res.writeHead(303, { ...SECURITY_HEADERS, location, 'cache-control': 'no-store', ...headers });
  res.end();
}

/** Wire error codes (DESIGN.md section 6) to HTTP statuses. */
const STATUS: Record<string, number> = {
  [ErrorCode.Validation]: 400,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.IllegalTransition]: 409,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.StaleAttempt]: 409,
  [ErrorCode.InvalidToken]: 403,
  [ErrorCode.Unavailable]: 503,
};

/** An error in the wire form `{"error":{"code","message","details"}}`, with its HTTP status. */
export function errorBody(err: unknown): { status: number; body: unknown } {
  if (isSonarError(err)) {
    return {
      status: STATUS[err.code] ?? 500,
      body: { error: { code: err.code, message: err.message, details: err.details } },
    };
  }
  return {
    status: 500,
    body: { error: { code: 'internal', message: 'internal error', details: {} } },
  };
}

/** An HTTP-level refusal (bad route, bad method, auth) in the same wire form. */
export function sendProblem(res: ServerResponse, status: number, code: string, message: string) {
  sendJson(res, status, { error: { code, message, details: {} } });
}

/**
 * 429 with `Retry-After` (whole seconds): too many failed logins from this client address.
 */
export function sendTooManyAttempts(res: ServerResponse, retryAfterMs: number): void {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  res.setHeader('retry-after', String(seconds));
  sendProblem(
    res,
    429,
    'too_many_requests',
    `too many failed logins from this address: retry in ${seconds} s`,
  );
}

/** Reads a small request body (actions and the login form); refuses more than `limit`. */
export async function readBody(req: IncomingMessage, limit = 16 * 1024): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export class BodyTooLarge extends SonarError {
  override readonly name = 'BodyTooLarge';
  constructor(readonly limit: number) {
    super(ErrorCode.Validation, `request body over ${limit} bytes`, { limit });
  }
}
