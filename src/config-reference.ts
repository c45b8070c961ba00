import { SETTINGS } from './config-table.js';
import type { ConfigVariable } from './config-table.js';

/** How docs/configuration.md says where to change it. */
export const CONFIG_REFERENCE_COMMAND = 'npm run docs:config';

const cell = (text: string): string => text.replaceAll('|', '\\|');

/**
 * docs/configuration.md, rendered from the settings table: one row per variable with its
 * field, default, the processes that read it and what it does, then a section for each
 * variable with a `detail`, which its row links to. A test keeps the file equal to this
 * rendering.
 */
export function renderConfigReference(): string {
  const variables = Object.keys(SETTINGS) as ConfigVariable[];
  const rows = variables.map((v) => {
    const row = SETTINGS[v];
    const fallback = row.default === undefined ? 'unset' : `\`${row.default}\``;
    // GitHub's anchor of the heading `SONAR_X` (in code) is `sonar_x`.
    const name = row.detail === undefined ? `\`${v}\`` : `[\`${v}\`](#${v.toLowerCase()})`;
    return `| ${name} | \`${row.field}\` | ${cell(fallback)} | ${row.usedBy.join(', ')} | ${cell(row.doc)} |`;
  });
  const details = variables.flatMap((v) => {
    const { detail } = SETTINGS[v];
    return detail === undefined ? [] : [`### \`${v}\``, '', detail, ''];
  });
  return [
    '# Configuration reference',
    '',
    `Generated from \`src/config-table.ts\` by \`${CONFIG_REFERENCE_COMMAND}\`; do not edit by hand.`,
    'Each `SONAR_*` variable is also a flag of `sonar backend` (`SONAR_PULSE_INTERVAL` is',
    '`--pulse-interval`), and a field of the `loadConfig()` result. Durations take `ms`, `s`,',
    '`m`, `h` or `d` (`5s`); sizes take `KiB`, `MiB` or `GiB` (`64MiB`). An empty value is unset.',
    '`cli` is the one-shot verbs and the client SDK. A linked variable has more under',
    '[Details](#details).',
    '',
    '| variable | field | default | read by | what it does |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
    '## Details',
    '',
    ...details,
  ].join('\n');
}
