export { openInfra, sealKeyFor, sealKeyringFor, type Infra } from './infra.js';
export { runStandalone, onShutdown, type ServiceHandle, type StartService } from './service.js';
export { serveApi, callApi, apiSubject, apiBatchSubject, ApiBatcher, type ApiBatchHandler, type ApiCall, type ApiPayload, type ApiHandler, type ApiResult, type ApiResponse, type Caller } from './api.js';
export { msUntil, PollLoop } from './poll-loop.js';
export { TurnBatcher, type TurnBatcherOptions } from './turn-batcher.js';
export { Outbox, outboxTable, type OutboxMessage, type PendingPublish } from './outbox.js';
export { ids, randomPooled } from './ids.js';
export { COMMAND_ACK_WAIT_MS, streams, subjects, WAKE_BATCH_MAX } from './topology.js';
export { MAX_REPLY_BYTES, RunnerHttp, tooLargeBody, traceparentFor, type RunnerPost } from './runner-http.js';
export { counter, gauge, histogram, infraGauges, metricsText, METRICS_CONTENT_TYPE, type Counter, type Histogram } from './metrics.js';
export { approvalListedMessage, resolveStepMessage } from './resolve-step.js';
export {
  DEFAULT_RETENTION_DAYS,
  followRetention,
  Retention,
  RETENTION_DAYS_RANGE,
  retentionTable,
  workspacesOf,
  type RetentionOptions,
  type RetentionTarget,
} from './retention.js';
export { collectAfterStart, manageHeap } from './heap.js';
