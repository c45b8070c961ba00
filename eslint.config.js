// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettierConfig from 'eslint-config-prettier';
import { componentBoundaries } from './eslint/component-boundaries.js';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      '.sonar/**',
      'bin/**',
      'scripts/**',
      // Plain JavaScript a bench runs as a user's program would (no tsconfig covers it).
      'bench/**/*.mjs',
      'eslint.config.js',
      'eslint/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { fixStyle: 'separate-type-imports' },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
      'no-console': 'error',
    },
  },
  {
    // The pure core: no network, no clock, no randomness, no node builtins (DESIGN.md §1).
    files: ['actors/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/src/**', '**/streams/**', '../src/*', '../streams/*'],
              message: 'actors/ is pure: it must not import src/ or streams/.',
            },
            {
              group: ['@nats-io/*', 'node:*', 'pino', 'minio'],
              message: 'actors/ is pure: no I/O libraries.',
            },
          ],
        },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'actors/ is pure: take `now` as an input.' },
        { object: 'Math', property: 'random', message: 'actors/ is pure: take ids as inputs.' },
        {
          object: 'crypto',
          property: 'randomUUID',
          message: 'actors/ is pure: take ids as inputs.',
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'actors/ is pure: take `now` as an input.',
        },
        {
          selector: 'CallExpression[callee.name=/^(setTimeout|setInterval|setImmediate)$/]',
          message: 'actors/ is pure: no timers.',
        },
      ],
      'no-restricted-globals': ['error', 'crypto', 'performance', 'process', 'fetch'],
    },
  },
  {
    // src/backend/'s components are entered through their index.ts only.
    files: ['src/**'],
    plugins: { sonar: { rules: { 'component-boundaries': componentBoundaries } } },
    rules: { 'sonar/component-boundaries': 'error' },
  },
  {
    // What a process reads of its environment is listed in one module: the configuration.
    files: ['src/**'],
    ignores: ['src/config.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'read settings through src/config.ts (loadProcessConfig, processEnvironment).',
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: ['process', 'node:process'].map((name) => ({
            name,
            importNames: ['env'],
            message: 'read settings through src/config.ts (loadProcessConfig, processEnvironment).',
          })),
        },
      ],
    },
  },
  {
    files: ['streams/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/src/**', '../src/*'], message: 'streams/ must not import src/.' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/cli/**', 'test/**', 'bench/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // examples/ import the package by its name, which resolves only where it is installed:
    // test/integration/examples.test.ts type-checks them there (tsc, strict). Here they get
    // the rules that need no type information.
    files: ['examples/**'],
    extends: [tseslint.configs.disableTypeChecked],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  prettierConfig,
);
