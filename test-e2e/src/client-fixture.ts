import { afterAll, beforeAll } from '@jest/globals';
import { createClient, type Client, type Runner } from '@dws/sdk';
import { startDeployment, type Deployment, type Mode } from './deployment.js';
import { realInfra } from './infra.js';
import { startRunner, type TestRunner } from './runner.js';

/** The modes an e2e file runs on: embedded, and the six-process fleet when Postgres and NATS are here. */
export const e2eModes = (): Mode[] => (realInfra() ? ['embedded', 'fleet'] : ['embedded']);

/** A deployment, one runner of the file's workflows, and an SDK client with the secret key. */
export interface ClientFixture {
  dep: Deployment;
  runner: TestRunner;
  client: Client;
}

/**
 * Call at the top of a describe: starts the deployment, the runner of
 * `define`'s workflows and the client before its tests, and stops them
 * after. The fields are there once its beforeAll has run.
 */
export function useClientFixture(mode: Mode, define: (r: Runner) => void): ClientFixture {
  const fx = {} as ClientFixture;
  beforeAll(async () => {
    fx.dep = await startDeployment(mode);
    fx.runner = await startRunner(fx.dep, define);
    fx.client = createClient({ url: `${fx.dep.base}/v1`, apiKey: fx.dep.secretKey, env: {} });
  }, 180_000);
  afterAll(async () => {
    await fx.runner?.close();
    await fx.dep?.stop();
  }, 60_000);
  return fx;
}
