import type { ApprovalRisk } from '@dws/sdk';

/**
 * The agent's tools, each with the risk it declares to the approval gate.
 * They act on an in-memory shop so the example runs anywhere; a real agent
 * would call the payment provider and the mail service here.
 */
export interface Order {
  orderId: string;
  email: string;
  total: number;
}

const orders = new Map<string, Order>([
  ['o-1', { orderId: 'o-1', email: 'ada@example.com', total: 120 }],
  ['o-2', { orderId: 'o-2', email: 'grace@example.com', total: 35 }],
]);

export interface ToolCall {
  tool: ToolName;
  args: Record<string, unknown>;
}

interface Tool {
  risk: ApprovalRisk;
  run(args: Record<string, unknown>): unknown;
}

export const tools = {
  /** Read-only: never worth a human's time. */
  lookup_order: {
    risk: 'low',
    run: ({ orderId }) => {
      const o = orders.get(String(orderId));
      if (!o) throw new Error(`no order ${String(orderId)}`);
      return { ...o };
    },
  },
  /** Moves money: a human signs off, and may lower the amount. */
  issue_refund: {
    risk: 'high',
    run: ({ orderId, amount }) => {
      const o = orders.get(String(orderId));
      if (!o) throw new Error(`no order ${String(orderId)}`);
      const n = Number(amount);
      if (!(n > 0) || n > o.total) throw new Error(`refund of ${String(amount)} does not fit order ${o.orderId} (total ${o.total})`);
      return { refundId: `re_${o.orderId}_${n}`, amount: n };
    },
  },
  /** Customer-visible, but reversible with an apology: below the gate. */
  send_email: {
    risk: 'medium',
    run: ({ to, subject }) => ({ sent: true, to, subject }),
  },
} satisfies Record<string, Tool>;

export type ToolName = keyof typeof tools;
