import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../actors/errors.js';
import {
  commandRefusal,
  guardCommands,
  parseCommandPolicy,
  resolveCommandPolicy,
} from '../../src/worker/command-policy.js';
import { isNonRetryableError } from '../../src/worker/errors.js';
import type { HandlerContext } from '../../src/worker/options.js';
import { resolveWorkerOptions } from '../../src/worker/options.js';

const ctxOf = (command?: string[]): HandlerContext => ({
  signal: new AbortController().signal,
  runId: 'r1',
  stepId: 's1',
  taskId: 't1',
  attempt: 1,
  attemptId: 'a1',
  ...(command !== undefined && { command }),
  progress: () => undefined,
  log: () => undefined,
});

describe('parseCommandPolicy (SONAR_WORKER_COMMANDS)', () => {
  it.each([
    ['any', { kind: 'any' }],
    ['none', { kind: 'none' }],
    [' NONE ', { kind: 'none' }],
    ['/bin/sh', { kind: 'allow', executables: ['/bin/sh'] }],
    ['/usr/bin/python3, echo ,echo', { kind: 'allow', executables: ['/usr/bin/python3', 'echo'] }],
  ])('%j is %j', (raw, policy) => {
    expect(parseCommandPolicy(raw)).toEqual(policy);
  });

  it.each([
    ['bin/sh', 'entry "bin/sh" is neither a name (no /) nor an absolute path'],
    ['./run.sh', 'entry "./run.sh" is neither a name (no /) nor an absolute path'],
    [
      '/usr/bin/../bin/sh',
      'entry "/usr/bin/../bin/sh" is not a normal absolute path (e.g. /usr/bin/sh)',
    ],
    ['/usr/bin/', 'entry "/usr/bin/" is not a normal absolute path (e.g. /usr/bin)'],
    ['/bin/sh,', 'entry 2 is empty'],
    [',', 'entry 1 is empty'],
    ['any,/bin/sh', 'entry "any" cannot be in a list (any stands alone)'],
    ['/bin/sh,None', 'entry "None" cannot be in a list (none stands alone)'],
    ['sh\n', null],
    ['a\tb', 'entry "a\\tb" has a control character'],
  ])('%j is refused, naming the value and the entry', (raw, problem) => {
    if (problem === null) {
      // Surrounding whitespace is trimmed: "sh\n" is the name sh.
      expect(parseCommandPolicy(raw)).toEqual({ kind: 'allow', executables: ['sh'] });
      return;
    }
    expect(() => parseCommandPolicy(raw)).toThrow(
      `${JSON.stringify(raw)} is not a command setting: ${problem}`,
    );
  });
});

describe('resolveCommandPolicy (the worker option `commands`)', () => {
  it('defaults to any, and takes a keyword, a list or a comma-separated string', () => {
    expect(resolveCommandPolicy(undefined)).toEqual({ kind: 'any' });
    expect(resolveCommandPolicy('none')).toEqual({ kind: 'none' });
    expect(resolveCommandPolicy(['/bin/sh', 'echo'])).toEqual({
      kind: 'allow',
      executables: ['/bin/sh', 'echo'],
    });
    expect(resolveCommandPolicy('/bin/sh,echo')).toEqual({
      kind: 'allow',
      executables: ['/bin/sh', 'echo'],
    });
  });

  it.each([
    [
      ['bin/sh'],
      'commands.0',
      `'commands.0' "bin/sh" is neither a name (no /) nor an absolute path`,
    ],
    [['echo', ''], 'commands.1', `'commands.1' "" is empty`],
    [[' echo'], 'commands.0', `'commands.0' " echo" has spaces around it`],
    [['none'], 'commands.0', `'commands.0' "none" cannot be in a list (none stands alone)`],
    [[], 'commands', `'commands' is an empty list: use 'none' to refuse every task command`],
    ['nope/x', 'commands', `'commands' "nope/x" is not a command setting: entry "nope/x"`],
    [[42], 'commands.0', `'commands.0' must be a string, got 42`],
    [true, 'commands', `'commands' must be 'any', 'none' or a list, got true`],
  ])('%j is refused with a ValidationError naming %s', (option, path, message) => {
    let err: unknown;
    try {
      resolveCommandPolicy(option as never);
    } catch (e: unknown) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toContain(message);
    expect((err as ValidationError).issues[0]?.path).toBe(path);
  });

  it('is checked by resolveWorkerOptions', () => {
    expect(() =>
      resolveWorkerOptions({ tags: ['a'], handler: () => 1, commands: ['x/y'] }),
    ).toThrow(`'commands.0' "x/y"`);
    expect(resolveWorkerOptions({ tags: ['a'], handler: () => 1 }).commands).toEqual({
      kind: 'any',
    });
  });
});

describe('commandRefusal', () => {
  const none = parseCommandPolicy('none');
  const allow = parseCommandPolicy('/bin/sh,echo');

  it('never refuses a task without a command, nor anything under any', () => {
    expect(commandRefusal(none, undefined)).toBeNull();
    expect(commandRefusal(allow, undefined)).toBeNull();
    expect(commandRefusal({ kind: 'any' }, ['rm', '-rf', '/'])).toBeNull();
  });

  it('under none refuses every command, naming it and the setting', () => {
    expect(commandRefusal(none, ['sh', '-c', 'touch x'])).toBe(
      'task command ["sh","-c","touch x"] refused: this worker runs no task commands (SONAR_WORKER_COMMANDS=none)',
    );
  });

  it('under an allow-list runs only an exact command[0], whatever the arguments', () => {
    expect(commandRefusal(allow, ['/bin/sh', '-c', 'anything'])).toBeNull();
    expect(commandRefusal(allow, ['echo'])).toBeNull();
    expect(commandRefusal(allow, ['sh', '-c', 'x'])).toBe(
      'task command ["sh","-c","x"] refused: "sh" is not allowed by this worker (SONAR_WORKER_COMMANDS=/bin/sh,echo)',
    );
    expect(commandRefusal(allow, ['/usr/bin/echo'])).toContain('"/usr/bin/echo" is not allowed');
    expect(commandRefusal(allow, ['/bin//sh'])).toContain('"/bin//sh" is not allowed');
  });

  it('keeps the message short whatever the task sent', () => {
    const refusal = commandRefusal(none, ['sh', '-c', 'x'.repeat(100_000)]);
    expect(refusal!.length).toBeLessThan(400);
  });
});

describe('guardCommands', () => {
  it('fails a refused task for good before the handler runs', async () => {
    let ran = 0;
    const guarded = guardCommands(() => ++ran, parseCommandPolicy('none'));
    let err: unknown;
    try {
      await guarded(undefined, ctxOf(['sh']));
    } catch (e: unknown) {
      err = e;
    }
    expect(isNonRetryableError(err)).toBe(true);
    expect((err as Error).message).toContain('SONAR_WORKER_COMMANDS=none');
    expect(ran).toBe(0);
    expect(await guarded(undefined, ctxOf())).toBe(1);
  });

  it('leaves the handler as it is under any', () => {
    const handler = () => 1;
    expect(guardCommands(handler, { kind: 'any' })).toBe(handler);
  });
});
