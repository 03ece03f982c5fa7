import tseslint from 'typescript-eslint';

const SERVICES = ['gateway', 'ingest', 'scheduler', 'invoker', 'approvals', 'webhook-dispatcher'];

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/.data/**', 'libs/proto/src/gen/**', '**/store/migrations/**', '**/dist/**', 'coverage/**'],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@dws/*/src/*', '../../*/*/src/*', '../../../*/*/src/*'], message: 'Import a workspace package by its name, never a path into its src/.' },
          ],
        },
      ],
    },
  },
  // Services meet only on the bus: no service imports another (the dev launcher composes them).
  ...SERVICES.map((s) => ({
    files: [`services/${s}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: SERVICES.filter((o) => o !== s).map((o) => ({ name: `@dws/${o}`, message: 'Services talk over the bus, never by import.' })),
          patterns: [{ group: ['../../*/src/*', '**/services/*'], message: 'Services talk over the bus, never by import.' }],
        },
      ],
    },
  })),
  // Libs never import services.
  {
    files: ['libs/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: SERVICES.map((o) => ({ name: `@dws/${o}`, message: 'Libs never import services.' })) }],
    },
  },
  // Tests, benchmarks and scripts may print.
  { files: ['**/*.test.ts', '**/test/**/*.ts', 'bench/**/*.ts', 'test-e2e/**/*.ts', 'scripts/**'], rules: { 'no-console': 'off' } },
);
