// Writes docs/cli-reference.md from the `sonar` program (src/cli/program.ts).
import { writeFileSync } from 'node:fs';
import { renderCliReference } from '../src/cli-reference.js';

writeFileSync(new URL('../docs/cli-reference.md', import.meta.url), renderCliReference());
