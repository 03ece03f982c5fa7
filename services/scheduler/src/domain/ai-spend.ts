import type { AiSpendCeilings, SpendLimit } from '@dws/protocol';

/**
 * The ceilings are checked before the service makes a model call (an Infer
 * step), against the usage recorded so far: a run or window at or over a
 * ceiling fails the Infer step instead of calling. Calls in flight at once
 * are not counted until they are recorded, so parallel Infer steps can
 * overshoot a ceiling by their own use.
 */

export interface Spend {
  tokens: number;
  cost: number;
}

/** The ceilings and what has been spent against them: what the decision needs. */
export interface AiSpendView {
  ceilings: AiSpendCeilings;
  run: Spend;
  window: Spend;
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(4).replace(/0+$/, ''));

/** Why a model call may not start, or undefined when every ceiling still has room. */
export function spendCeilingReached(v: AiSpendView): string | undefined {
  const check = (limit: SpendLimit | undefined, spent: Spend, what: string): string | undefined => {
    if (!limit) return undefined;
    if (limit.tokens !== undefined && spent.tokens >= limit.tokens) {
      return `AI spend ceiling reached: ${what} used ${fmt(spent.tokens)} tokens of its ${fmt(limit.tokens)}.`;
    }
    if (limit.cost !== undefined && spent.cost >= limit.cost) {
      return `AI spend ceiling reached: ${what} spent ${fmt(spent.cost)} of its ${fmt(limit.cost)}.`;
    }
    return undefined;
  };
  const w = v.ceilings.perWindow;
  return (
    check(v.ceilings.perRun, v.run, 'this run') ??
    (w ? check(w, v.window, `this workflow's runs over the last ${fmt(w.windowMs / 1000)} s`) : undefined)
  );
}

/**
 * A workspace's monthly model ceilings (admin API limits modelTokensPerMonth,
 * modelCostPerMonth) and what its steps recorded this UTC month: present only
 * when one is set and the pass asks for a model call.
 */
export interface WorkspaceModelView {
  /** The UTC month counted, YYYY-MM. */
  month: string;
  ceilings: { tokens?: number; cost?: number };
  spent: Spend;
}

/** Why the workspace may not make another model call this month, or undefined while it has room. */
export function workspaceCeilingReached(v: WorkspaceModelView): string | undefined {
  const { tokens, cost } = v.ceilings;
  if (tokens !== undefined && v.spent.tokens >= tokens) {
    return `Workspace model usage ceiling reached: this workspace used ${fmt(v.spent.tokens)} model tokens of its ${fmt(tokens)} for ${v.month} (UTC).`;
  }
  if (cost !== undefined && v.spent.cost >= cost) {
    return `Workspace model usage ceiling reached: this workspace spent ${fmt(v.spent.cost)} on model calls of its ${fmt(cost)} for ${v.month} (UTC).`;
  }
  return undefined;
}
