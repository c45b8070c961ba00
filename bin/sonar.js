#!/usr/bin/env -S node --max-semi-space-size=32 --heap-growing-percent=20
// A larger young generation (32 MiB semi-spaces, default 16) cuts scavenge time when the
// backend folds events: replay from the stream goes from ~92k to ~100k events/s
// (bench/event-store.ts runs with the same flag).
// A heap grown by 20% past the live size after each full GC (V8 otherwise lets it grow up to
// several times under a burst of garbage, as a 100k-task submit is): the backend's RSS at
// 100k Pending tasks falls from ~430 to ~290 MB for ~5% more CPU at saturation, and replay
// speed is unchanged (bench/e2e.ts, README.md benchmark section).
// Runs the TypeScript CLI straight from source through tsx, so `npx sonar` works right
// after `npm ci` with no build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
