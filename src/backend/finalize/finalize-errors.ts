import { ErrorCode, SonarError } from '../../../actors/errors.js';

/** A failure that no retry can fix: the output is missing or invalid. Poisons at once. */
export class PermanentFinalizeError extends SonarError {
  override readonly name = 'PermanentFinalizeError';
  constructor(message: string, details: Record<string, unknown> = {}) {
    super(ErrorCode.Validation, message, details);
  }
}

export const isPermanentFinalizeError = (e: unknown): e is PermanentFinalizeError =>
  e instanceof PermanentFinalizeError;
