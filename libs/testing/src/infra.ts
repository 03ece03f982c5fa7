/** Where the real Postgres and NATS of the int/e2e jest projects are. */
export interface TestInfra {
  databaseUrl: string;
  natsUrl: string;
}

/**
 * The real infra that scripts/jest-infra-setup.js found or started (it sets
 * TEST_DATABASE_URL and TEST_NATS_URL), or null when either is missing: then
 * the setup has already warned loudly (and on CI it fails the run instead).
 */
export function testInfra(env: NodeJS.ProcessEnv = process.env): TestInfra | null {
  const databaseUrl = env.TEST_DATABASE_URL;
  const natsUrl = env.TEST_NATS_URL;
  return databaseUrl && natsUrl ? { databaseUrl, natsUrl } : null;
}

/** Just the Postgres part of {@link testInfra}, for suites that need no bus. */
export function testDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string | null {
  return env.TEST_DATABASE_URL || null;
}
