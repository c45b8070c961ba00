/**
 * The lint rule that keeps src/backend/'s components behind their index.ts, run on code
 * samples at real paths: an import into another component's file is refused, through its
 * index (or within the same component, or of a backend root file) it is not.
 */
import { join } from 'node:path';
import { RuleTester } from 'eslint';
import { describe, it } from 'vitest';
import { componentBoundaries } from '../../eslint/component-boundaries.js';

RuleTester.describe = describe;
RuleTester.it = it;

const src = join(import.meta.dirname, '..', '..', 'src');
const tester = new RuleTester({ languageOptions: { ecmaVersion: 2022, sourceType: 'module' } });

tester.run('component-boundaries', componentBoundaries, {
  valid: [
    {
      filename: join(src, 'cli/commands/status.ts'),
      code: "import { a } from '../../backend/reconciler/index.js';",
    },
    {
      filename: join(src, 'backend/api/handlers/x.ts'),
      code: "import { a } from '../api-service.js';",
    },
    {
      filename: join(src, 'backend/sweep/full-sweep.ts'),
      code: "import { a } from '../context.js';",
    },
    { filename: join(src, 'worker/worker.ts'), code: "import { a } from '../log.js';" },
  ],
  invalid: [
    {
      filename: join(src, 'cli/commands/status.ts'),
      code: "import { planConfigOf } from '../../backend/reconciler/reconcile-pass.js';",
      errors: [{ message: /import src\/backend\/reconciler\/ through its index\.js/ }],
    },
    {
      filename: join(src, 'backend/api/handlers/x.ts'),
      code: "export { Registry } from '../../reconciler/registry.js';",
      errors: 1,
    },
    {
      filename: join(src, 'backend/backend.ts'),
      code: "import { A } from './finalize/finalize-job.js';",
      errors: 1,
    },
  ],
});
