import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { transformSync } from 'esbuild';
import { asset } from './asset.js';
import type { Asset } from './asset.js';

/** esbuild's options for the dashboard script; scripts/build.mjs prebuilds with the same. */
export const APP_JS_OPTIONS = {
  loader: 'ts',
  format: 'iife',
  target: 'es2020',
  sourcefile: 'app.ts',
} as const;

/**
 * The dashboard's only script (`../browser/app.ts`, type-checked against the DOM and linted
 * like the rest), served as `/assets/app.js`, read on the first request for it. The package
 * (dist/) ships it prebuilt by `npm run build` as `../browser/app.js`; run from the sources
 * (the tests), there is no such file and it is transpiled here with esbuild, a dev
 * dependency, loaded only then: a process that serves no dashboard never starts esbuild.
 */
let made: Asset | undefined;

export function appJs(): Asset {
  if (made === undefined) {
    const prebuilt = new URL('../browser/app.js', import.meta.url);
    if (existsSync(prebuilt)) {
      made = asset(readFileSync(prebuilt, 'utf8'));
    } else {
      const esbuild = createRequire(import.meta.url)('esbuild') as {
        transformSync: typeof transformSync;
      };
      const source = readFileSync(new URL('../browser/app.ts', import.meta.url), 'utf8');
      made = asset(esbuild.transformSync(source, APP_JS_OPTIONS).code);
    }
  }
  return made;
}
