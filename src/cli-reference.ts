import type { Argument, Command, Option } from 'commander';
import { buildProgram } from './cli/program.js';

/** How docs/cli-reference.md says where to change it. */
export const CLI_REFERENCE_COMMAND = 'npm run docs:cli';

/**
 * Text from a commander description, safe in Markdown prose: backtick spans are kept as they
 * are, and outside them the characters that would start HTML (`<host>` would vanish as a tag),
 * emphasis (`SONAR_*`, `_INBOX`) or a table cell boundary are escaped.
 */
function prose(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part, i) =>
      i % 2 === 1
        ? part.replaceAll('|', '\\|')
        : part
            .replaceAll('\\', '\\\\')
            .replace(/[<*|]/g, (c) => `\\${c}`)
            .replace(/(^|[^A-Za-z0-9])_/g, '$1\\_'),
    )
    .join('');
}

/** A code span for a cell: `|` must be escaped even there. */
const code = (text: string): string => `\`${text.replaceAll('|', '\\|')}\``;

const argumentTerm = (a: Argument): string => {
  const name = `${a.name()}${a.variadic ? '...' : ''}`;
  return a.required ? `<${name}>` : `[${name}]`;
};

function defaultCell(o: Option): string {
  if (o.mandatory) return 'required';
  if (o.defaultValueDescription !== undefined) return prose(o.defaultValueDescription);
  if (o.defaultValue === undefined || o.negate) return '';
  return code(String(o.defaultValue));
}

/** What `addHelpText` put before and after a command's own help, as `--help` prints it. */
function helpTexts(cmd: Command): { before: string; after: string } {
  let printed = '';
  cmd.configureOutput({
    writeOut: (s) => (printed += s),
    getOutHelpWidth: () => 100,
    getOutHasColors: () => false,
  });
  cmd.outputHelp();
  const own = cmd.helpInformation();
  const at = printed.indexOf(own);
  return {
    before: at > 0 ? printed.slice(0, at).trim() : '',
    after: at >= 0 ? printed.slice(at + own.length).trim() : '',
  };
}

const textBlock = (text: string): string[] => (text === '' ? [] : ['```text', text, '```', '']);

/** The heading anchor GitHub gives `## sonar creds init`. */
const anchor = (cmd: Command): string => `#${fullName(cmd).replaceAll(' ', '-')}`;

function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Subcommands a user can run: commander's implicit `help` command is `--help` again. */
const verbs = (cmd: Command): Command[] =>
  cmd
    .createHelp()
    .visibleCommands(cmd)
    .filter((c) => c.name() !== 'help');

const summaryOf = (cmd: Command): string => cmd.summary() || cmd.description();

function verbTable(cmd: Command): string[] {
  return [
    '| verb | what it does |',
    '| --- | --- |',
    ...verbs(cmd).map((c) => `| [${code(fullName(c))}](${anchor(c)}) | ${prose(summaryOf(c))} |`),
    '',
  ];
}

function renderCommand(cmd: Command, depth: number): string[] {
  const help = cmd.createHelp();
  const args = help.visibleArguments(cmd);
  // Every verb has --help; the intro says so once.
  const options = help.visibleOptions(cmd).filter((o) => o.long !== '--help');
  const { before, after } = helpTexts(cmd);
  const out = [
    `${'#'.repeat(depth)} ${fullName(cmd)}`,
    '',
    '```text',
    help.commandUsage(cmd),
    '```',
    '',
    prose(cmd.description()),
    '',
    ...textBlock(before),
  ];
  if (args.length > 0) {
    out.push('| argument | what it is |', '| --- | --- |');
    for (const a of args) out.push(`| ${code(argumentTerm(a))} | ${prose(a.description)} |`);
    out.push('');
  }
  if (options.length > 0) {
    // No default column where no option has one (the backend's say theirs in the text).
    const defaults = options.map(defaultCell);
    const withDefaults = defaults.some((d) => d !== '');
    out.push(
      withDefaults ? '| option | default | what it does |' : '| option | what it does |',
      withDefaults ? '| --- | --- | --- |' : '| --- | --- |',
    );
    options.forEach((o, i) => {
      const cells = [code(o.flags), ...(withDefaults ? [defaults[i]!] : []), prose(o.description)];
      out.push(`| ${cells.join(' | ')} |`);
    });
    out.push('');
  }
  out.push(...textBlock(after));
  const subs = verbs(cmd);
  if (subs.length > 0) {
    out.push(...verbTable(cmd));
    for (const sub of subs) out.push(...renderCommand(sub, depth + 1));
  }
  return out;
}

/**
 * docs/cli-reference.md, rendered from the program `sonar` runs (src/cli/program.ts): each
 * verb's usage, description, arguments, options with their defaults, and the help text it adds
 * (examples, exit codes), in the order `sonar --help` lists them. A test keeps the file equal
 * to this rendering, so the reference and `--help` cannot drift apart.
 */
export function renderCliReference(program: Command = buildProgram()): string {
  const { after } = helpTexts(program);
  const lines = [
    '# CLI reference',
    '',
    `Generated from the \`sonar\` program (\`src/cli/program.ts\`) by \`${CLI_REFERENCE_COMMAND}\`;`,
    'do not edit by hand: change the descriptions in `src/cli/commands/` and run it again.',
    'What the verbs print with `--json`, and how they fail, is in [cli.md](cli.md); every',
    '`SONAR_*` setting is in [configuration.md](configuration.md).',
    '',
    `${prose(program.description())}. Every verb takes \`-h, --help\` (or \`sonar help <verb>\`);`,
    '`sonar -V` (`--version`) prints the version.',
    '',
    ...verbTable(program),
    'What `sonar --help` ends with:',
    '',
    ...textBlock(after),
  ];
  for (const cmd of verbs(program)) lines.push(...renderCommand(cmd, 2));
  return `${lines.join('\n').trimEnd()}\n`;
}
