import type { WorkflowContext } from '@dws/sdk';

/** The ticket a `support/ticket.opened` event carries. */
export interface Ticket {
  ticketId: string;
  orderId: string;
  message: string;
}

/** What the model answers each turn (its text is JSON): a tool call, or the reply to the customer. */
export type Turn = { tool: 'lookup_order' | 'issue_refund'; args: Record<string, unknown>; why: string } | { reply: string };

export const MODEL = 'claude-sonnet-4-5';
const SYSTEM = `You resolve support tickets. Answer with JSON only: {"tool":"lookup_order","args":{"orderId":...},"why":...},
{"tool":"issue_refund","args":{"orderId":...,"amount":...},"why":...}, or {"reply":"..."} once the ticket is resolved.`;
const MAX_TURNS = 6;

/** The tools, each with the risk it declares: the refund is gated on a human from `high` up. */
const TOOLS = {
  lookup_order: { risk: 'low', run: (a: Record<string, unknown>) => ({ orderId: a.orderId, total: 120, item: 'Green tea, 12 tins' }) },
  issue_refund: { risk: 'high', run: (a: Record<string, unknown>) => ({ refunded: a.amount, orderId: a.orderId }) },
} as const;

/**
 * The agent loop: each turn the service calls the model (step.ai.generate,
 * durable: a replay never calls it again), the proposed tool call passes the
 * approval gate, and the tool runs with the args the decision carries. The
 * answer is scored at the end: by a rule, and by the model as a judge.
 */
export async function supportAgent({ event, step }: WorkflowContext<Ticket>) {
  const ticket = event.data;
  const messages: { role: 'user' | 'assistant'; content: string }[] = [
    { role: 'user', content: `Ticket ${ticket.ticketId} about order ${ticket.orderId}: ${ticket.message}` },
  ];
  for (let i = 0; i < MAX_TURNS; i++) {
    const answer = await step.ai.generate<{ text: string }>(`think-${i}`, { model: MODEL, system: SYSTEM, messages, maxTokens: 512, temperature: 0 });
    messages.push({ role: 'assistant', content: answer.text });
    const turn = JSON.parse(answer.text) as Turn;
    if ('reply' in turn) {
      await step.score('resolved-in-turns', { name: 'turns', value: i + 1 });
      const verdict = await step.ai.generate<{ text: string }>('judge', {
        model: MODEL,
        system: 'Rate the reply to the customer from 0 to 1. Answer with the number only.',
        messages: [{ role: 'user', content: turn.reply }],
        maxTokens: 8,
        temperature: 0,
      });
      await step.score('judged', { name: 'quality', value: Number(verdict.text), judge: MODEL });
      return { reply: turn.reply, turns: i + 1 };
    }
    const tool = TOOLS[turn.tool];
    const decision = await step.approval<Record<string, unknown>>(`approve-${i}`, {
      tool: turn.tool,
      args: turn.args,
      risk: tool.risk,
      minRisk: 'high',
      iteration: i,
      summary: turn.why,
      allow: ['approve', 'edit', 'reject'],
    });
    if (decision.status !== 'approved') {
      messages.push({ role: 'user', content: `A reviewer denied ${turn.tool}. Do not retry it.` });
      continue;
    }
    const result = await step.run(`${turn.tool}-${i}`, () => tool.run(decision.args));
    messages.push({ role: 'user', content: `Result of ${turn.tool}: ${JSON.stringify(result)}` });
  }
  return { reply: 'Escalated to a human: too many turns.', turns: MAX_TURNS };
}
