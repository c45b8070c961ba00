#!/usr/bin/env -S node --max-semi-space-size=32 --heap-growing-percent=20
// A larger young generation (32 MiB semi-spaces, default 16) cuts scavenge time when the
// backend folds events, so replay from the stream runs faster (bench/event-store.ts runs with
// the same flag).
// A heap grown by 20% past the live size after each full GC (V8 otherwise lets it grow up to
// several times under a burst of garbage, as a large submit is): the backend's RSS with many
// Pending tasks falls by about a third for a little more CPU at saturation, and replay speed
// is unchanged (bench/e2e.ts; the figures are in docs/benchmarks.md).
// deploy/Dockerfile's ENTRYPOINT passes the same flags (test/integration/package-install.test.ts
// checks that they agree).
// Runs the compiled CLI from dist/ (`npm run build`; `npm start` and `npm test` build it when
// it is missing or stale): plain Node, no TypeScript loader.
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/src/cli/main.js', import.meta.url);
try {
  await import(main.href);
} catch (err) {
  // Only dist/ missing is explained here; any other failure (a missing dependency, an error
  // at load) is thrown as it is.
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes(fileURLToPath(main))) {
    throw err;
  }
  process.stderr.write('sonar: dist/ is not built: run `npm run build` (or `npm start`)\n');
  process.exit(1);
}
