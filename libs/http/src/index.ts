export { createHttpApp, jsonBody, errorMiddleware, notFoundHandler, healthRoutes, type HealthCheck } from './app.js';
export { listen, type HttpListener } from './listen.js';
