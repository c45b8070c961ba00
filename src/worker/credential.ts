import { createUser } from '@nats-io/nkeys';
import type { KeyPair } from '@nats-io/nkeys';
import { jwtAuthenticator } from '@nats-io/transport-node';
import type { Authenticator } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import type { Logger } from '../log.js';
import type { CredentialReply } from '../protocol.js';
import type { ApiClient } from './api-client.js';
import { isApiError } from './api-client.js';

/** How the backend that answered `enroll` wants this worker to connect. */
export type EnrollMode = CredentialReply['mode'] | 'legacy';

/** The retry pause once a renewal failed. */
const RENEW_RETRY_MS = 5_000;

/**
 * How far from its connection's cut a renewal is sent: a request in flight when the server
 * closes the connection loses its reply (the import's reply mapping goes with it).
 */
export const RENEW_CUT_GUARD_MS = 1_000;

/**
 * When to renew a credential expiring at `expiresAt`: at half its remaining life, unless that
 * falls within {@link RENEW_CUT_GUARD_MS} of `cutAt`, when the server closes the connection
 * (the expiry of the JWT it was opened with). Renewing at half each time would otherwise meet
 * every cut exactly: a connection opened with a fresh JWT is cut a full life later, when the
 * second renewal since is due. Such a renewal goes before the cut, or after it when there is
 * no time before.
 */
export function renewalTime(now: number, expiresAt: number, cutAt: number): number {
  const half = now + (expiresAt - now) / 2;
  if (Math.abs(half - cutAt) >= RENEW_CUT_GUARD_MS) return half;
  const before = cutAt - RENEW_CUT_GUARD_MS;
  if (before > now) return before;
  const after = cutAt + RENEW_CUT_GUARD_MS;
  return after < expiresAt ? after : half;
}

/** Asks `enroll` again with the bootstrap credential (a connection of its own, closed after). */
export type Reenroll = () => Promise<CredentialReply>;

/**
 * A worker's own key pair and the credential the backend minted for it (secure mode). The
 * seed never leaves this process: `enroll` sends only the public key, and the JWT it gets
 * back is useless without the seed, so the reply may travel on a shared inbox.
 *
 * The authenticator reads the current JWT at each (re)connect: a renewal takes effect at the
 * next connect, which the server forces when the connection's JWT expires.
 */
export class WorkerCredential {
  private readonly keys: KeyPair = createUser();
  private jwt: string | null = null;
  private expiresAt = 0;
  private presentedExpiresAt = Infinity;
  private timer: NodeJS.Timeout | null = null;
  private reenrolling: Promise<void> | null = null;
  private fenced: ((err: unknown) => void) | null = null;
  private reenroll: Reenroll | null = null;
  mode: EnrollMode = 'open';
  /** Where this worker's JetStream requests go (`apiPrefix`); unset: `$JS.API`. */
  jsApiPrefix: string | undefined;
  /**
   * Where this worker asks a backend to pull for it (`<prefix>.pull.<workerId>`, a tag
   * appended); unset: it pulls the dispatch consumers itself.
   */
  pullSubject: string | undefined;

  constructor(
    private readonly workerId: string,
    private readonly log: Logger,
  ) {}

  get publicKey(): string {
    return this.keys.getPublicKey();
  }

  /**
   * Asks for a credential with the bootstrap connection's client. An older backend does not
   * know `enroll` (`not_found`): the worker then speaks the shared subjects, as before.
   */
  async enroll(api: ApiClient, signal: AbortSignal): Promise<EnrollMode> {
    try {
      const reply = await api.request<'enroll', CredentialReply>(
        'enroll',
        { workerId: this.workerId, publicKey: this.publicKey },
        { signal },
      );
      this.take(reply);
    } catch (err: unknown) {
      if (!isApiError(err, ErrorCode.NotFound)) throw err;
      this.mode = 'legacy';
    }
    return this.mode;
  }

  /** The nats.js authenticator presenting the current JWT, signed with this worker's seed. */
  authenticator(): Authenticator {
    return jwtAuthenticator(
      () => {
        this.presentedExpiresAt = this.jwt === null ? Infinity : this.expiresAt;
        return this.jwt ?? '';
      },
      () => this.keys.getSeed(),
    );
  }

  /**
   * Ms until the server closes the live connection: the expiry of the JWT it was opened
   * with (a renewed JWT is presented only at the next connect). Infinity without one.
   */
  msUntilCut(now = Date.now()): number {
    return this.presentedExpiresAt - now;
  }

  /**
   * Renews at half the remaining life, away from the connection's cut ({@link renewalTime}), with `api` on the worker's own subject. A refusal
   * (`forbidden`: revoked; `conflict`: Lost or Left) is `onFenced`; anything else is retried.
   * Once the credential has expired (an outage outlived it), its own connection cannot come
   * back with it: the worker enrolls again with the bootstrap credential, under the same key,
   * and the next reconnect presents the new JWT. So an outage of any length is waited out.
   */
  startRenewing(
    api: ApiClient,
    signal: AbortSignal,
    reenroll: Reenroll,
    onFenced: (err: unknown) => void,
  ): void {
    if (this.mode !== 'secure') return;
    this.reenroll = reenroll;
    this.fenced = onFenced;
    const schedule = (ms: number): void => {
      if (signal.aborted) return;
      this.timer = setTimeout(() => void renew(), Math.max(0, ms));
      this.timer.unref();
    };
    const scheduleNext = (): void => {
      const now = Date.now();
      schedule(renewalTime(now, this.expiresAt, this.presentedExpiresAt) - now);
    };
    const renew = async (): Promise<void> => {
      try {
        const reply =
          Date.now() >= this.expiresAt
            ? await reenroll()
            : await api.request<'renew', CredentialReply>(
                'renew',
                { workerId: this.workerId, publicKey: this.publicKey },
                { signal, retryForMs: Math.max(0, this.expiresAt - Date.now()) },
              );
        this.take(reply);
        this.log.info('credential renewed', { expiresAt: new Date(this.expiresAt).toISOString() });
        scheduleNext();
      } catch (err: unknown) {
        if (signal.aborted) return;
        if (isApiError(err, ErrorCode.Forbidden) || isApiError(err, ErrorCode.Conflict)) {
          onFenced(err);
          return;
        }
        this.log.warn('credential not renewed; trying again', { err });
        schedule(RENEW_RETRY_MS);
      }
    };
    scheduleNext();
  }

  /**
   * The server refused this connection's credential. At its expiry (`expired`), the
   * reconnect presents the renewed JWT, unless that one has expired too. Otherwise (revoked,
   * or expired in an outage) the worker enrolls again with the bootstrap credential at once:
   * `ok` gives a JWT for the next reconnect; a revoked, Lost or Left worker is refused, and
   * is fenced.
   */
  onAuthError(expired: boolean): void {
    const reenroll = this.reenroll;
    if (this.mode !== 'secure' || reenroll === null || this.reenrolling) return;
    if (expired && Date.now() < this.expiresAt) return;
    this.reenrolling = (async () => {
      try {
        this.take(await reenroll());
        this.log.info('credential refused by the server: enrolled again', {
          expiresAt: new Date(this.expiresAt).toISOString(),
        });
      } catch (err: unknown) {
        if (isApiError(err, ErrorCode.Forbidden) || isApiError(err, ErrorCode.Conflict)) {
          this.fenced?.(err);
        } else {
          this.log.warn('could not enroll again; trying at the next refusal', { err });
        }
      }
    })().finally(() => {
      this.reenrolling = null;
    });
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private take(reply: CredentialReply): void {
    this.mode = reply.mode === 'secure' ? 'secure' : 'open';
    if (this.mode !== 'secure') return;
    if (reply.jwt === null || reply.expiresAt === null) {
      throw new SonarError(
        ErrorCode.Decode,
        'the backend answered secure mode without a credential',
      );
    }
    this.jwt = reply.jwt;
    this.expiresAt = Date.parse(reply.expiresAt);
    this.jsApiPrefix = reply.jsApiPrefix;
    this.pullSubject = reply.pullSubject;
  }
}
