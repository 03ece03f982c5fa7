import type { ToolCall } from './tools.js';

/** A support ticket: the customer wants their money back. */
export interface Ticket {
  ticketId: string;
  orderId: string;
  message: string;
}

/** What the agent did so far, as the model reads it back each turn. */
export interface Turn {
  call: ToolCall;
  /** The tool's output; absent when the call was denied. */
  output?: unknown;
  /** Who signed off (absent when the call was not gated). */
  approvedBy?: string;
  denied?: boolean;
}

export type Plan = { kind: 'call'; call: ToolCall; why: string } | { kind: 'answer'; text: string };

/**
 * A stand-in for the model: the next step of the agent from the ticket and
 * the transcript. Deterministic so the example runs without an API key;
 * swap in your model call here (the workflow memoises it in a step, so a
 * replay never asks twice).
 */
export function plan(ticket: Ticket, transcript: Turn[]): Plan {
  const done = (tool: ToolCall['tool']) => transcript.find((t) => t.call.tool === tool);
  const lookup = done('lookup_order');
  if (!lookup) return { kind: 'call', call: { tool: 'lookup_order', args: { orderId: ticket.orderId } }, why: 'read the order first' };
  const order = lookup.output as { email: string; total: number };
  const refund = done('issue_refund');
  if (!refund) {
    // The model asks for the full amount; the reviewer may lower it.
    return {
      kind: 'call',
      call: { tool: 'issue_refund', args: { orderId: ticket.orderId, amount: order.total } },
      why: `refund order ${ticket.orderId} in full`,
    };
  }
  if (!done('send_email')) {
    const subject = refund.denied
      ? 'About your refund request'
      : `Refund of ${String((refund.output as { amount: number }).amount)} issued`;
    return { kind: 'call', call: { tool: 'send_email', args: { to: order.email, subject } }, why: 'tell the customer' };
  }
  return { kind: 'answer', text: refund.denied ? 'Refund declined by a reviewer; customer told.' : 'Refund issued; customer told.' };
}
