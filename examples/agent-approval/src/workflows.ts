import { createRunner } from '@dws/sdk';
import { supportAgent } from './agent.js';
import type { Ticket } from './model.js';

/**
 * One runner with one agent workflow. Everything the service needs comes
 * from the environment: SERVICE_API_KEY (the secret key `pnpm dev` prints),
 * SERVICE_URL, SERVICE_APP.
 */
export const runner = createRunner({
  url: process.env.SERVICE_URL ?? 'http://127.0.0.1:8288/v1',
  app: process.env.SERVICE_APP ?? 'support',
  runnerId: 'support-1',
});

/** The agent, started by each `support/ticket.opened` event. */
export const supportAgentWorkflow = runner.workflow<Ticket>(
  'support-agent',
  { triggers: [{ event: 'support/ticket.opened' }] },
  supportAgent,
);
