import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';
import { configHelp } from '../../src/cli/config-help.js';
import { configDefaults, configVariables, loadConfig } from '../../src/config.js';
import { CONFIG_REFERENCE_COMMAND, renderConfigReference } from '../../src/config-reference.js';
import { SETTINGS } from '../../src/config-table.js';
import { DEFAULT_PLAN_CONFIG } from '../../actors/reconciler/config.js';
import { planConfigOf } from '../../src/backend/reconciler/index.js';

const REFERENCE = fileURLToPath(new URL('../../docs/configuration.md', import.meta.url));

describe('the configuration table', () => {
  it('is what docs/configuration.md says, as generated', async () => {
    const options = (await prettier.resolveConfig(REFERENCE)) ?? {};
    const expected = await prettier.format(renderConfigReference(), {
      ...options,
      filepath: REFERENCE,
    });
    expect(
      await readFile(REFERENCE, 'utf8'),
      `docs/configuration.md is stale: run ${CONFIG_REFERENCE_COMMAND}`,
    ).toBe(expected);
  });

  it('gives every variable its field, its default and its help', () => {
    const config = loadConfig({}) as unknown as Record<string, unknown>;
    for (const v of configVariables) {
      const row = SETTINGS[v];
      expect(configHelp(v)).toContain(row.doc);
      if (row.default === undefined) {
        expect(configDefaults, v).not.toHaveProperty(v);
        if (!row.field.includes('.')) expect(config, v).not.toHaveProperty(row.field);
        continue;
      }
      expect((configDefaults as Record<string, string>)[v]).toBe(row.default);
      // The default parses to what loadConfig gives with nothing set.
      expect(config[row.field], v).toEqual(row.parse(row.default));
    }
  });

  it("holds the pure planner's defaults: DEFAULT_PLAN_CONFIG is the table's defaults", () => {
    expect(planConfigOf(loadConfig({}), true)).toEqual(DEFAULT_PLAN_CONFIG);
  });
});
