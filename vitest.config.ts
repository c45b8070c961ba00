import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globals: false,
    // Builds dist/ when it is stale: the tests import the sources, but the processes they
    // spawn run bin/sonar.js, which loads dist/ (scripts/ensure-build.mjs).
    globalSetup: ['scripts/ensure-build.mjs'],
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { test: { name: 'replay', include: ['test/replay/**/*.test.ts'] } },
      // The reconciler's deterministic fleet simulation: pure, but seconds long.
      { test: { name: 'sim', include: ['test/sim/**/*.test.ts'], testTimeout: 120_000 } },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          pool: 'forks',
          hookTimeout: 30_000,
          testTimeout: 60_000,
        },
      },
      // Fault scenarios with real processes, half a minute each: run by `npm run test:long`.
      {
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.test.ts'],
          pool: 'forks',
          fileParallelism: false,
          hookTimeout: 60_000,
          testTimeout: 300_000,
        },
      },
      // Outages of minutes: `npm run test:long` too, after the chaos scenarios.
      {
        test: {
          name: 'long',
          include: ['test/long/**/*.test.ts'],
          pool: 'forks',
          fileParallelism: false,
          hookTimeout: 120_000,
          testTimeout: 600_000,
        },
      },
    ],
  },
});
