/**
 * The TLS of a NATS connection (docs/operations.md, "TLS"), from `SONAR_NATS_TLS_CA`,
 * `SONAR_NATS_TLS_CERT`, `SONAR_NATS_TLS_KEY` and the URL's scheme.
 *
 * @module
 */
import { access, constants } from 'node:fs/promises';
import type { TlsOptions } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import type { SonarConfig } from './config.js';

export type NatsTlsSettings = Pick<
  SonarConfig,
  'natsUrl' | 'natsTlsCa' | 'natsTlsCert' | 'natsTlsKey'
>;

const FILES = [
  ['natsTlsCa', 'SONAR_NATS_TLS_CA', 'caFile'],
  ['natsTlsCert', 'SONAR_NATS_TLS_CERT', 'certFile'],
  ['natsTlsKey', 'SONAR_NATS_TLS_KEY', 'keyFile'],
] as const;

/** True when any server of a comma-separated `SONAR_NATS_URL` is written `tls://`. */
export function wantsTls(natsUrl: string): boolean {
  return natsUrl.split(',').some((s) => s.trim().toLowerCase().startsWith('tls://'));
}

/**
 * nats.js's `tls` option, or `undefined` when nothing asks for TLS: then the connection is
 * plain unless the server requires TLS (it is then verified against the system's CAs).
 *
 * A `tls://` URL or any TLS file makes TLS required: nats.js then refuses a server that
 * offers none, so a misrouted connection cannot fall back to plain text. Files are passed
 * by path, not read here: nats.js reads them at every (re)connect, so a renewed certificate
 * (a rotated Kubernetes Secret) is picked up without a restart.
 *
 * @throws SonarError `validation` naming the setting: half a certificate pair, or a file
 * that cannot be read.
 */
export async function natsTlsOptions(settings: NatsTlsSettings): Promise<TlsOptions | undefined> {
  const given = FILES.filter(([field]) => settings[field] !== undefined);
  if (given.length === 0 && !wantsTls(settings.natsUrl)) return undefined;
  if ((settings.natsTlsCert === undefined) !== (settings.natsTlsKey === undefined)) {
    throw new SonarError(
      ErrorCode.Validation,
      'SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY: set both for mutual TLS, or neither',
      { natsTlsCert: settings.natsTlsCert, natsTlsKey: settings.natsTlsKey },
    );
  }
  const tls: TlsOptions = {};
  for (const [field, variable, option] of given) {
    const path = settings[field]!;
    try {
      await access(path, constants.R_OK);
    } catch (err: unknown) {
      const why = (err as NodeJS.ErrnoException).code ?? String(err);
      throw new SonarError(
        ErrorCode.Validation,
        `${variable}: cannot read ${JSON.stringify(path)} (${why})`,
        { [field]: path },
        { cause: err },
      );
    }
    tls[option] = path;
  }
  return tls;
}

/** Node's codes for a server certificate that does not chain up to a trusted CA. */
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
]);

/** The alerts a server sends when it refuses the client's certificate, or its absence. */
const CLIENT_REFUSED =
  /alert (bad certificate|certificate required|unknown ca|certificate unknown)/;

/**
 * One line saying why a TLS handshake failed and which setting fixes it, or `undefined` when
 * `err` (or its causes) is no TLS failure. OpenSSL's own messages span lines and name source
 * files: `...:ssl3_read_bytes:sslv3 alert bad certificate:../deps/openssl/...:SSL alert number 42\n`.
 */
export function tlsFailure(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 5; depth++, e = e.cause) {
    const { code, reason } = e as Error & { code?: unknown; reason?: unknown };
    if (typeof code !== 'string') continue;
    if (UNTRUSTED.has(code)) {
      return `TLS: the server's certificate is not trusted (${e.message}): set SONAR_NATS_TLS_CA to the CA that signed it`;
    }
    if (code === 'CERT_HAS_EXPIRED') return `TLS: the server's certificate has expired`;
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
      return `TLS: ${e.message} (the server's certificate must name the host of SONAR_NATS_URL)`;
    }
    if (code.startsWith('ERR_SSL_') && typeof reason === 'string') {
      return CLIENT_REFUSED.test(reason)
        ? `TLS: the server refused this client (${reason}): a server with mutual TLS needs SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY, signed by a CA it trusts`
        : `TLS: ${reason}`;
    }
  }
  return undefined;
}
