import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { CLI_REFERENCE_COMMAND, renderCliReference } from '../../src/cli-reference.js';

const REFERENCE = fileURLToPath(new URL('../../docs/cli-reference.md', import.meta.url));
const CLI_PAGE = fileURLToPath(new URL('../../docs/cli.md', import.meta.url));

/** The verbs DESIGN.md section 8 and the additions since name: each must stay a verb. */
const VERBS = [
  'dev',
  'backend',
  'worker',
  'workers',
  'submit',
  'status',
  'results',
  'logs',
  'tail',
  'cancel',
  'rerun',
  'poisoned',
  'schedule',
  'sweep',
  'revoke',
  'creds',
  'export',
  'replay',
  'plan',
];

/** Every command under `cmd`, depth first, without commander's implicit `help`. */
function commandsOf(cmd: Command): Command[] {
  return cmd.commands.filter((c) => c.name() !== 'help').flatMap((c) => [c, ...commandsOf(c)]);
}

const fullName = (c: Command): string =>
  c.parent ? `${fullName(c.parent)} ${c.name()}` : c.name();

describe('the CLI reference', () => {
  it('is what docs/cli-reference.md says, as generated', async () => {
    const options = (await prettier.resolveConfig(REFERENCE)) ?? {};
    const expected = await prettier.format(renderCliReference(), {
      ...options,
      filepath: REFERENCE,
    });
    expect(
      await readFile(REFERENCE, 'utf8'),
      `docs/cli-reference.md is stale: run ${CLI_REFERENCE_COMMAND}`,
    ).toBe(expected);
  });

  it('has a section for every verb with its usage, description, arguments and options', () => {
    const program = buildProgram();
    const text = renderCliReference(program);
    expect(program.commands.map((c) => c.name()).filter((n) => n !== 'help')).toEqual(VERBS);
    for (const cmd of commandsOf(program)) {
      const name = fullName(cmd);
      const section = text.split(new RegExp(`^#+ ${name}$`, 'm'))[1];
      expect(section, `no section for ${name}`).toBeDefined();
      const own = section!.split(/^#+ sonar /m)[0]!;
      expect(own, name).toContain(cmd.createHelp().commandUsage(cmd));
      expect(own.replaceAll('\\', ''), name).toContain(cmd.description());
      for (const a of cmd.registeredArguments)
        expect(own, `${name} ${a.name()}`).toContain(a.name());
      for (const o of cmd.options) {
        expect(own, `${name} ${o.flags}`).toContain(`\`${o.flags}\``);
      }
    }
  });

  it('gives every verb, argument and option a description of its own', () => {
    for (const cmd of commandsOf(buildProgram())) {
      const name = fullName(cmd);
      // A verb says more than a few words, or its --help and the reference say nothing.
      expect(cmd.description().length, `${name}: description`).toBeGreaterThan(20);
      for (const a of cmd.registeredArguments) {
        expect(a.description, `${name} ${a.name()}`).not.toBe('');
      }
      for (const o of cmd.options) expect(o.description, `${name} ${o.flags}`).not.toBe('');
    }
  });

  it('is linked from docs/cli.md, which keeps what --help does not say', async () => {
    const page = await readFile(CLI_PAGE, 'utf8');
    expect(page).toContain('](cli-reference.md)');
    expect(page).toContain('## JSON outputs');
  });
});
