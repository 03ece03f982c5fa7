import type { WorkflowHandler } from '@dws/sdk';
import { plan, type Ticket, type Turn } from './model.js';
import { tools } from './tools.js';

/** A runaway agent stops here instead of looping forever. */
const MAX_TURNS = 8;

/**
 * A support agent: each turn the model picks a tool call, the approval gate
 * decides whether a human must sign off, and the tool runs with the args
 * the decision carries (the reviewer's edit, if any). Calls below `high`
 * risk pass the gate at once; a refund parks the run until someone decides.
 */
export const supportAgent: WorkflowHandler<Ticket> = async ({ event, step, logger }) => {
  const transcript: Turn[] = [];
  for (let i = 0; i < MAX_TURNS; i++) {
    // The model call is a step: a replay reads its answer back instead of asking again.
    const next = await step.run(`plan-${i}`, () => plan(event.data, transcript));
    if (next.kind === 'answer') return { answer: next.text, transcript };
    const tool = tools[next.call.tool];
    const decision = await step.approval<Record<string, unknown>>(`approve-${i}`, {
      tool: next.call.tool,
      args: next.call.args,
      risk: tool.risk,
      minRisk: 'high',
      iteration: i,
      summary: next.why,
      context: `ticket ${event.data.ticketId}: ${event.data.message}`,
      allow: ['approve', 'edit', 'reject'],
    });
    if (decision.status === 'denied') {
      logger.info('tool call denied', { tool: next.call.tool, by: decision.decidedBy });
      transcript.push({ call: next.call, denied: true });
      continue;
    }
    // decision.args, not next.call.args: the reviewer's edits are what gets carried out.
    const call = { tool: next.call.tool, args: decision.args };
    const output = await step.run(`call-${i}`, () => tool.run(call.args));
    transcript.push({ call, output, ...(decision.gated ? { approvedBy: decision.decidedBy } : {}) });
  }
  return { answer: `gave up after ${MAX_TURNS} turns`, transcript };
};
