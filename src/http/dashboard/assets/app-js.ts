import { readFileSync } from 'node:fs';
import { transformSync } from 'esbuild';
import { asset } from './asset.js';
import type { Asset } from './asset.js';

/**
 * The dashboard's only script (`../browser/app.ts`, type-checked against the DOM and linted
 * like the rest), transpiled on the first request for it: the server runs from its
 * TypeScript sources, so there is no build step to ship a bundle from, and a process that
 * serves no dashboard (a worker, a CLI verb) never starts esbuild. Served as `/assets/app.js`.
 */
let made: Asset | undefined;

export function appJs(): Asset {
  if (made === undefined) {
    const source = readFileSync(new URL('../browser/app.ts', import.meta.url), 'utf8');
    const { code } = transformSync(source, {
      loader: 'ts',
      format: 'iife',
      target: 'es2020',
      sourcefile: 'app.ts',
    });
    made = asset(code);
  }
  return made;
}
