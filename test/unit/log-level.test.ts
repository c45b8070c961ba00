import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';

const LEVELS = 'one of trace, debug, info, warn, error, fatal, silent';

describe('SONAR_LOG_LEVEL', () => {
  it('is read like every setting: trimmed, any case, unset when empty', () => {
    expect(loadConfig({ SONAR_LOG_LEVEL: ' DEBUG ' }).logLevel).toBe('debug');
    expect(loadConfig({ SONAR_LOG_LEVEL: '' }).logLevel).toBeUndefined();
    expect(loadConfig({}).logLevel).toBeUndefined();
  });

  it('refuses an unknown level, naming the variable', () => {
    expect(() => loadConfig({ SONAR_LOG_LEVEL: 'loud' })).toThrow(
      `SONAR_LOG_LEVEL: "loud" is not a log level (${LEVELS})`,
    );
  });

  it('a level given in code is checked the same way', () => {
    const make = () => createLogger({ level: 'loud' });
    expect(make).toThrow(ValidationError);
    expect(make).toThrow(`"loud" is not a log level (${LEVELS})`);
  });
});
