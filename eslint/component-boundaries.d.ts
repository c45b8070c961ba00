import type { Rule } from 'eslint';

/** See component-boundaries.js. */
export declare const componentBoundaries: Rule.RuleModule;
