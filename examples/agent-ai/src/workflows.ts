import { createRunner } from '@dws/sdk';
import { supportAgent, type Ticket } from './agent.js';

/** One runner with the agent (SERVICE_URL, SERVICE_API_KEY, SERVICE_APP from the environment). */
export const runner = createRunner({
  url: process.env.SERVICE_URL ?? 'http://127.0.0.1:8288/v1',
  app: process.env.SERVICE_APP ?? 'support-ai',
  runnerId: 'support-ai-1',
});

export const supportAgentWorkflow = runner.workflow<Ticket>('support-ai-agent', { triggers: [{ event: 'support/ticket.opened' }] }, supportAgent);
