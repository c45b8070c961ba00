import { SETTINGS } from '../config-table.js';
import type { ConfigVariable } from '../config.js';

/** `--tick <value>`'s help: `reconcile tick (SONAR_TICK, default 2s)`. */
export function configHelp(v: ConfigVariable): string {
  const row = SETTINGS[v];
  const extra = row.default === undefined ? v : `${v}, default ${row.default}`;
  return `${row.doc} (${extra})`;
}
