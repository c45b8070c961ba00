import { ErrorCode, SonarError } from './errors.js';

/**
 * Refuses a library version whose internals Sonar was not tested against. A few speed-ups
 * read private fields of nats.js and XState; a minor release may move them, and the failure
 * would be silent (a slower path) or subtle (a wrong fold). `tested` is `major.minor`; any
 * patch of it passes. The message is one line, naming the package, both versions and the fix.
 */
export function assertTestedVersion(library: string, installed: string, tested: string): void {
  const [major, minor] = installed.split('.');
  if (`${major}.${minor}` === tested) return;
  throw new SonarError(
    ErrorCode.Conflict,
    `sonar: ${library} ${installed} is installed, but Sonar reads its internals as of ${tested}.x; install ${library}@~${tested}.0`,
  );
}
