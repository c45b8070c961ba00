import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { isLoopback } from '../loopback.js';
import type { Sessions } from './session-store.js';
import { ValidationError } from '../../../actors/errors.js';

export const SESSION_COOKIE = 'sonar_session';

const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Equal without leaking where they differ (hashing first makes the lengths equal). */
const same = (a: string, b: string): boolean => timingSafeEqual(sha256(a), sha256(b));

export interface DashboardAuthOptions {
  /** `SONAR_HTTP_TOKEN`; unset: no token (loopback only, see {@link isLocalHost}). */
  token?: string | undefined;
  /** Where logins live; required with a token. */
  sessions?: Sessions | undefined;
  /** `SONAR_HTTP_SECURE_COOKIE`. @defaultValue `auto` */
  secureCookie?: 'auto' | boolean;
}

/** What a request presents: the right credential, a wrong bearer token, or nothing valid. */
export type Credential = 'ok' | 'bad-token' | 'none';

/**
 * Access to the dashboard. With `SONAR_HTTP_TOKEN` set, every request needs it: as
 * `Authorization: Bearer <token>` (scripts, curl), or as the session cookie that `/login`
 * sets, since a browser's EventSource cannot send headers. The cookie holds a random session
 * id kept in the shared sessions bucket (session-store.ts): it expires with
 * `SONAR_SESSION_TTL` and a logout ends it on every backend. The token is never accepted in
 * a URL (it would end up in logs and history).
 */
export class DashboardAuth {
  private readonly token: string | undefined;
  private readonly sessions: Sessions | undefined;
  private readonly secureCookie: 'auto' | boolean;

  constructor(opts: DashboardAuthOptions = {}) {
    this.token = opts.token;
    this.sessions = opts.sessions;
    this.secureCookie = opts.secureCookie ?? 'auto';
    if (this.token !== undefined && this.sessions === undefined) {
      throw new ValidationError('DashboardAuth: a token needs a session store');
    }
  }

  get enabled(): boolean {
    return this.token !== undefined;
  }

  /** Checks the request's bearer token or session cookie. `ok` when no token is set. */
  async check(req: IncomingMessage): Promise<Credential> {
    if (this.token === undefined) return 'ok';
    const header = req.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer\s+(.+)$/i.exec(header.trim());
      return m !== null && same(m[1]!, this.token) ? 'ok' : 'bad-token';
    }
    const id = cookieOf(req, SESSION_COOKIE);
    return id !== null && (await this.sessions!.isLive(id)) ? 'ok' : 'none';
  }

  /** Whether the request carries the token or a live session. True when no token is set. */
  async allows(req: IncomingMessage): Promise<boolean> {
    return (await this.check(req)) === 'ok';
  }

  /** Whether a token typed into the login form is the right one. */
  accepts(candidate: string): boolean {
    return this.token !== undefined && same(candidate, this.token);
  }

  /**
   * Starts a session after a good login; returns the `Set-Cookie` value: HttpOnly, never
   * sent cross-site, gone from the browser when the session expires, `Secure` behind TLS.
   */
  async login(req: IncomingMessage): Promise<string> {
    const id = await this.sessions!.create();
    const maxAge = Math.floor(this.sessions!.ttlMs / 1000);
    return `${SESSION_COOKIE}=${id}; ${this.attributes(req)}; Max-Age=${maxAge}`;
  }

  /** Ends the request's session everywhere; returns the `Set-Cookie` value that clears it. */
  async logout(req: IncomingMessage): Promise<string> {
    const id = cookieOf(req, SESSION_COOKIE);
    if (id !== null && this.sessions !== undefined) await this.sessions.revoke(id);
    return `${SESSION_COOKIE}=; ${this.attributes(req)}; Max-Age=0`;
  }

  private attributes(req: IncomingMessage): string {
    const secure = this.secureCookie === 'auto' ? isSecureRequest(req) : this.secureCookie;
    return `HttpOnly; SameSite=Strict; Path=/${secure ? '; Secure' : ''}`;
  }
}

/**
 * Whether the request reached us over TLS: on a TLS socket, or through a proxy that says
 * `X-Forwarded-Proto: https` (its first value: the hop nearest the browser). A client that
 * forges the header only makes its own cookie `Secure`.
 */
export function isSecureRequest(req: IncomingMessage): boolean {
  if ((req.socket as Partial<TLSSocket> | undefined)?.encrypted === true) return true;
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === 'https';
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
 * So, without a token, only requests addressed to a loopback name are served: `localhost`,
 * 127.x.y.z or `[::1]`. Any other IP literal is not local: a request addressed to the
 * machine's network address came over the network.
 */
export function isLocalHost(hostHeader: string | undefined): boolean {
  if (hostHeader === undefined) return true; // HTTP/1.0 clients; browsers always send Host
  const h = hostHeader.trim();
  let host: string;
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    if (end < 0) return false;
    host = h.slice(1, end);
  } else if (h.split(':').length > 2) {
    host = h; // a bare IPv6 literal (not valid in Host, but judged by what it names)
  } else {
    host = h.replace(/:\d*$/, '');
  }
  return isLoopback(host);
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
