import type { Logger } from '../log.js';
import { silentLogger } from '../log.js';
import { ErrorCode, SonarError } from '../../actors/errors.js';

/** A spot interruption notice: IMDS `spot/instance-action`, e.g. `{"action":"terminate","time":"..."}`. */
export interface SpotNotice {
  action: string;
  /** ISO-8601 time the instance will be stopped or terminated. */
  time: string;
}

/** The token's lifetime asked for; it is refreshed whenever IMDS answers 401. */
const TOKEN_TTL_SECONDS = 21_600;

/**
 * A minimal IMDSv2 client (DESIGN.md section 6): a session token from `PUT /latest/api/token`
 * with the TTL header, sent as `X-aws-ec2-metadata-token` on every GET, and fetched again
 * when a GET answers 401 (the token expired).
 */
export class ImdsClient {
  private token: string | null = null;

  constructor(
    /** `SONAR_IMDS_URL`, e.g. `http://169.254.169.254`. */
    private readonly baseUrl: string,
    private readonly timeoutMs = 2_000,
  ) {}

  private url(path: string): string {
    return `${this.baseUrl.replace(/\/+$/, '')}${path}`;
  }

  private async refreshToken(): Promise<string> {
    const res = await fetch(this.url('/latest/api/token'), {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(TOKEN_TTL_SECONDS) },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!res.ok)
      throw new SonarError(
        ErrorCode.Unavailable,
        `imds: PUT /latest/api/token answered ${res.status}`,
      );
    this.token = await res.text();
    return this.token;
  }

  /** GETs a metadata path: the body on 200, null on 404; other answers throw. */
  async get(path: string): Promise<string | null> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const token = this.token ?? (await this.refreshToken());
      const res = await fetch(this.url(path), {
        headers: { 'X-aws-ec2-metadata-token': token },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (res.status === 401) {
        this.token = null;
        continue;
      }
      if (res.status === 404) return null;
      if (!res.ok)
        throw new SonarError(ErrorCode.Unavailable, `imds: GET ${path} answered ${res.status}`);
      return await res.text();
    }
    throw new SonarError(
      ErrorCode.Unavailable,
      `imds: GET ${path} still answered 401 with a fresh token`,
    );
  }

  /** True when IMDS answers a token request: the worker runs on a cloud instance. */
  async available(): Promise<boolean> {
    try {
      await this.refreshToken();
      return true;
    } catch {
      return false;
    }
  }
}

/** Parses a notice body; null when it is not one (a notice must carry a valid time). */
export function parseSpotNotice(body: string): SpotNotice | null {
  try {
    const raw = JSON.parse(body) as { action?: unknown; time?: unknown };
    if (typeof raw.time !== 'string' || Number.isNaN(Date.parse(raw.time))) return null;
    return { action: typeof raw.action === 'string' ? raw.action : 'terminate', time: raw.time };
  } catch {
    return null;
  }
}

/**
 * Polls `GET /latest/meta-data/spot/instance-action` (default every 5 s): 404 means no notice;
 * the first 200 with a notice calls `onNotice` once and stops polling.
 */
export class SpotNoticeWatcher {
  private timer: NodeJS.Timeout | null = null;
  private fired = false;

  constructor(
    private readonly imds: ImdsClient,
    private readonly onNotice: (notice: SpotNotice) => void,
    private readonly intervalMs = 5_000,
    private readonly log: Logger = silentLogger,
  ) {}

  start(): void {
    const tick = (): void => {
      void this.check().finally(() => {
        if (!this.fired && this.timer !== null) this.timer = setTimeout(tick, this.intervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  /** One poll; resolves with the notice when there is one. */
  async check(): Promise<SpotNotice | null> {
    try {
      const body = await this.imds.get('/latest/meta-data/spot/instance-action');
      if (body === null) return null;
      const notice = parseSpotNotice(body);
      if (!notice) {
        this.log.warn('spot notice not understood', { body: body.slice(0, 200) });
        return null;
      }
      if (!this.fired) {
        this.fired = true;
        this.stop();
        this.onNotice(notice);
      }
      return notice;
    } catch (err: unknown) {
      this.log.debug('spot notice poll failed', { err });
      return null;
    }
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
