// The e2e harness, shared with bench/: start deployments the way users do, run SDK runners, call the API.
export { startDeployment, SERVICES, type Deployment, type Mode } from './deployment.js';
export { startRunner, type TestRunner } from './runner.js';
export { api, eventually, runReached, Terminal, TERMINAL_STATUSES, type ApiReply } from './api.js';
export { realInfra, freshDatabase, freshNamespace } from './infra.js';
export { bundleOf, ensureBuilt, nodeFlagsOf } from './processes.js';
export { freePort, startNatsServer, type NatsServer } from '@dws/testing';
