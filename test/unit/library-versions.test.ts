import { afterEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, SonarError } from '../../actors/errors.js';
import { assertTestedVersion } from '../../actors/tested-version.js';

afterEach(() => {
  vi.doUnmock('xstate/package.json');
  vi.doUnmock('@nats-io/transport-node/package.json');
  vi.resetModules();
});

describe('the libraries whose internals Sonar reads', () => {
  it('accepts any patch of the tested minor, and refuses another minor in one line', () => {
    expect(() => assertTestedVersion('xstate', '5.33.9', '5.33')).not.toThrow();
    for (const other of ['5.34.0', '5.3.3', '6.33.0']) {
      expect(() => assertTestedVersion('xstate', other, '5.33')).toThrow(
        new SonarError(
          ErrorCode.Conflict,
          `sonar: xstate ${other} is installed, but Sonar reads its internals as of 5.33.x; install xstate@~5.33.0`,
        ),
      );
    }
  });

  it('the installed versions are the tested ones (the modules load)', async () => {
    const xstate = await import('../../actors/xstate-internals.js');
    const nats = await import('../../streams/nats-internals.js');
    expect(xstate.XSTATE_TESTED).toBe('5.33');
    expect(nats.NATS_JS_TESTED).toBe('3.4');
  });

  it('loading the XState door with another reported version refuses, naming it', async () => {
    vi.resetModules();
    vi.doMock('xstate/package.json', () => ({ default: { version: '5.34.1' } }));
    await expect(import('../../actors/xstate-internals.js')).rejects.toThrow(
      /^sonar: xstate 5\.34\.1 is installed, but Sonar reads its internals as of 5\.33\.x; install xstate@~5\.33\.0$/,
    );
  });

  it('loading the nats.js door with another reported version refuses, naming it', async () => {
    vi.resetModules();
    vi.doMock('@nats-io/transport-node/package.json', () => ({ default: { version: '3.5.0' } }));
    await expect(import('../../streams/nats-internals.js')).rejects.toThrow(
      /^sonar: @nats-io\/transport-node 3\.5\.0 is installed, but Sonar reads its internals as of 3\.4\.x/,
    );
  });
});
