import { createLogger } from '../../src/log.js';
import type { Logger } from '../../src/log.js';

/** One parsed log line: its level and message, and whatever fields it carried. */
export interface LoggedLine {
  level: string;
  msg: string;
}

/** A debug-level logger that keeps every line it writes, for tests to assert on warnings. */
export function recordingLogger(): { log: Logger; lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const log = createLogger({
    level: 'debug',
    destination: { write: (l: string) => void lines.push(JSON.parse(l) as LoggedLine) },
  });
  return { log, lines };
}
