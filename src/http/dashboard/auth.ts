import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

export const SESSION_COOKIE = 'sonar_session';

const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Equal without leaking where they differ (hashing first makes the lengths equal). */
const same = (a: string, b: string): boolean => timingSafeEqual(sha256(a), sha256(b));

/**
 * Access to the dashboard (issue 9). With `SONAR_HTTP_TOKEN` set, every request needs it: as
 * `Authorization: Bearer <token>` (scripts, curl), or as the session cookie that `/login`
 * sets, since a browser's EventSource cannot send headers. The cookie holds an HMAC of the
 * token, never the token itself, and changing the token ends every session. The token is
 * never accepted in a URL (it would end up in logs and history).
 */
export class DashboardAuth {
  private readonly session: string | null;

  constructor(private readonly token: string | undefined) {
    this.session =
      token === undefined
        ? null
        : createHmac('sha256', token).update('sonar-dashboard-session-v1').digest('hex');
  }

  get enabled(): boolean {
    return this.token !== undefined;
  }

  /** Whether the request carries the token or a valid session. True when no token is set. */
  allows(req: IncomingMessage): boolean {
    if (this.token === undefined) return true;
    const header = req.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer\s+(.+)$/i.exec(header.trim());
      return m !== null && same(m[1]!, this.token);
    }
    const cookie = cookieOf(req, SESSION_COOKIE);
    return cookie !== null && same(cookie, this.session!);
  }

  /** Whether a token typed into the login form is the right one. */
  accepts(candidate: string): boolean {
    return this.token !== undefined && same(candidate, this.token);
  }

  /** The `Set-Cookie` value after a good login: HttpOnly, and never sent cross-site. */
  sessionCookie(): string {
    return `${SESSION_COOKIE}=${this.session ?? ''}; HttpOnly; SameSite=Strict; Path=/`;
  }

  static clearCookie(): string {
    return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
  }
}

function cookieOf(req: IncomingMessage, name: string): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/**
 * Without a token the port is open to anything that can reach 127.0.0.1, web pages included:
 * a page on another site could point a name at 127.0.0.1 (DNS rebinding) and read the API.
 * So, without a token, only requests addressed to localhost or an IP literal are served.
 */
export function isLocalHost(hostHeader: string | undefined): boolean {
  if (hostHeader === undefined) return true; // HTTP/1.0 clients; browsers always send Host
  const host = hostHeader.startsWith('[')
    ? hostHeader.slice(1, hostHeader.indexOf(']'))
    : hostHeader.replace(/:\d+$/, '');
  return host === 'localhost' || isIP(host) !== 0;
}

/**
 * Cross-site request forgery: a browser always sends `Origin` on a cross-site POST, so an
 * action is refused when its Origin names another host than the one addressed. Requests from
 * scripts (no Origin) pass; they need the token like any other when one is set.
 */
export function isSameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch (_err: unknown) {
    return false;
  }
}
