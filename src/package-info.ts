import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package's root: the nearest directory above this module holding a package.json. The
 * same answer from the sources (`src/`, run by the tests) and from the build
 * (`dist/src/`, run by `bin/sonar.js` and the installed package).
 */
function findPackageRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return dirname(here);
  }
}

export const PACKAGE_ROOT = findPackageRoot();

/** `bin/sonar.js`: what supervised children run, the same CLI as their supervisor. */
export const SONAR_BIN = join(PACKAGE_ROOT, 'bin', 'sonar.js');

/** The package's version (`sonar --version`), read from its package.json. */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
