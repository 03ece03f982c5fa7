export { openInfra, sealKeyFor, type Infra } from './infra.js';
export { runStandalone, onShutdown, type ServiceHandle, type StartService } from './service.js';
export { serveApi, callApi, apiSubject, type ApiCall, type ApiHandler, type ApiResult, type ApiResponse, type Caller } from './api.js';
export { Outbox, outboxTable, type OutboxMessage, type PendingPublish } from './outbox.js';
export { ids, randomPooled } from './ids.js';
export { streams, subjects } from './topology.js';
