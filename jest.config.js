import { availableParallelism } from 'node:os';

// One jest config, three projects: unit (pure, milliseconds), int (real
// Postgres + NATS, and the embedded adapters), e2e (the fleet via the public API).
const base = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'es6' } }],
  },
  // NodeNext sources import './x.js'; the file on disk is './x.ts'.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testPathIgnorePatterns: ['/node_modules/', '/.data/'],
};

export default {
  // Two files at a time even on two cores (jest's default there is one): most of a file's time is
  // waiting (timers, sleeps, retries, fleets starting), so the suite takes ~14 minutes instead of ~25.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  // Jest in ESM mode keeps each test file's modules alive after it (jestjs/jest#14605): in one process
  // the heap grows ~7 MB a file, past 1 GB by mid-run, with second-long full collections landing inside
  // timed tests. Each worker is replaced once its heap in use is past this after a file.
  workerIdleMemoryLimit: '512MB',
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: ['<rootDir>/{libs,services,apps,examples}/*/src/**/*.test.ts', '<rootDir>/libs/*/test/**/*.unit.test.ts', '<rootDir>/scripts/*.test.ts'],
    },
    {
      ...base,
      displayName: 'int',
      testMatch: ['<rootDir>/{libs,services,apps}/*/test/**/*.int.test.ts'],
      globalSetup: '<rootDir>/scripts/jest-infra-setup.js',
    },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test-e2e/test/**/*.e2e.test.ts'],
      // The infra, and one build of the services' bundles (they run from dist/).
      globalSetup: '<rootDir>/scripts/jest-e2e-setup.js',
    },
  ],
};
