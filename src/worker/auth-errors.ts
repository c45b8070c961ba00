import { AuthorizationError, UserAuthenticationExpiredError } from '@nats-io/transport-node';

/** The server refused the connection's credential: expired, revoked or unknown. */
export const isAuthError = (err: unknown): boolean =>
  err instanceof AuthorizationError || err instanceof UserAuthenticationExpiredError;

/** The server closed the connection because the JWT it was opened with expired. */
export const isExpiredCredential = (err: unknown): boolean =>
  err instanceof UserAuthenticationExpiredError;
