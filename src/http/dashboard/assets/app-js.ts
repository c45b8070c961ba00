import { readFileSync } from 'node:fs';
import { transformSync } from 'esbuild';
import { asset } from './asset.js';

/**
 * The dashboard's only script (`../browser/app.ts`, type-checked against the DOM and linted
 * like the rest), transpiled once when the server loads: the server runs from its TypeScript
 * sources, so there is no build step to ship a bundle from. Served as `/assets/app.js`.
 */
function transpile(): string {
  const source = readFileSync(new URL('../browser/app.ts', import.meta.url), 'utf8');
  return transformSync(source, {
    loader: 'ts',
    format: 'iife',
    target: 'es2020',
    sourcefile: 'app.ts',
  }).code;
}

export const APP_JS = asset(transpile());
