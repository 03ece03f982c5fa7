export { createHttpApp, jsonBody, parseJsonBody, requestIdOf, errorMiddleware, errorReply, type IdentifiedRequest, notFoundHandler, healthRoutes, BODY_LIMIT_BYTES, type HealthCheck, type JsonBodyOptions } from './app.js';
export { listen, type FirstHandler, type HttpListener } from './listen.js';
export { MAX_JSON_DEPTH, stringProblem, describeStringProblem, findBadString, jsonDepthExceeds, decodeUtf8, type StringProblem, type BadString } from './body-checks.js';
export { checkWebSocketUpgrade, refuseUpgrade, type UpgradeRefusal } from './upgrade.js';
export type { Express } from 'express';
