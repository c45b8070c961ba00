// Writes docs/configuration.md from the settings table (src/config-table.ts).
import { writeFileSync } from 'node:fs';
import { renderConfigReference } from '../src/config-reference.js';

writeFileSync(new URL('../docs/configuration.md', import.meta.url), renderConfigReference());
