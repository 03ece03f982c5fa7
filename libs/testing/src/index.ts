export { testInfra, testDatabaseUrl, type TestInfra } from './infra.js';
export { uniqueName } from './names.js';
export {
  openTestDb,
  openEmbeddedTestDb,
  testDbTargets,
  type TestDb,
  type TestDbOptions,
} from './test-db.js';
export { sse, type SseEvent } from './sse.js';
export { seededRandom } from './seeded.js';
export { preparedPlan, recordingDb } from './db-probes.js';
export { freePort, startNatsServer, untilListening, type NatsServer } from './nats-server.js';
export { Gates } from './gates.js';
