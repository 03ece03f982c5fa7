export * from './types.js';
export { connectJetStreamBus, deleteNamespace, type JetStreamBusOptions } from './jetstream.js';
export {
  createEmbeddedBus,
  type EmbeddedBusOptions,
  type EmbeddedBusStore,
  type StoredBusState,
  type StoredMessage,
} from './embedded.js';
export { createSqlBusStore, type SqlClient } from './sql-store.js';
export { DLQ_HEADERS, DLQ_STREAM, type BusLogger } from './policy.js';
export { namespaceStreams, prefixedBus } from './prefixed.js';
