#!/usr/bin/env node
// Runs the TypeScript CLI straight from source through tsx, so `npx sonar` works right
// after `npm ci` with no build step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
