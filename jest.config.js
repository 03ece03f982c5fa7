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
  // Jest in ESM mode keeps each test file's modules alive after it (jestjs/jest#14605): in one process
  // the heap grows ~7 MB a file, past 1 GB by mid-run, with second-long full collections landing inside
  // timed tests. Two cores make jest run in band; with this limit it runs the files in one worker
  // instead, and starts a fresh one once the worker's heap in use is past it after a file.
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
