import { readFile } from 'node:fs/promises';
import { decode } from '@nats-io/jwt';
import { credsAuthenticator } from '@nats-io/transport-node';
import type { Authenticator } from '@nats-io/transport-node';
import { ErrorCode, SonarError } from '../actors/errors.js';
import { STATIC_ROLES, roleInboxPrefix } from './auth/permissions.js';
import type { StaticRole } from './auth/permissions.js';

/** A creds file, read: its authenticator and, for a Sonar role's user, its inbox prefix. */
export interface Creds {
  authenticator: Authenticator;
  /**
   * `_INBOX_R.<role>` for a user `sonar creds init` made for a role (its JWT is named after
   * the role): that user may receive replies only there. Undefined for any other creds.
   */
  inboxPrefix: string | undefined;
}

const isRole = (name: unknown): name is StaticRole =>
  typeof name === 'string' && (STATIC_ROLES as readonly string[]).includes(name);

/** Reads `SONAR_NATS_CREDS`; an unreadable file is a `validation` error naming it. */
export async function readCreds(path: string): Promise<Creds> {
  let text: Uint8Array;
  try {
    text = await readFile(path);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new SonarError(ErrorCode.Validation, `SONAR_NATS_CREDS: cannot read ${path}: ${why}`, {
      variable: 'SONAR_NATS_CREDS',
      path,
    });
  }
  const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+?)\s*------END/.exec(
    new TextDecoder().decode(text),
  )?.[1];
  let name: unknown;
  try {
    name = jwt === undefined ? undefined : decode(jwt).name;
  } catch {
    name = undefined;
  }
  return {
    authenticator: credsAuthenticator(text),
    inboxPrefix: isRole(name) ? roleInboxPrefix(name) : undefined,
  };
}
