/**
 * A workflow's AI spend ceilings as registered (`aiSpend` on a workflow in
 * POST /register; SPEC Limits: "Per-run and rolling-window AI spend
 * ceilings are opt-in and unlimited by default"). Spend is what the service
 * meters: tokens (in + out) and the cost of priced calls. The invoker
 * checks the shape at register time; the scheduler enforces it
 * (services/scheduler/src/domain/ai-spend.ts).
 */

export interface SpendLimit {
  /** tokensIn + tokensOut. */
  tokens?: number;
  /** The sum of priced calls' cost. */
  cost?: number;
}

export interface AiSpendCeilings {
  /** What one run may spend. */
  perRun?: SpendLimit;
  /** What the workflow's runs in this workspace may spend over the last windowMs (rolling). */
  perWindow?: SpendLimit & { windowMs: number };
}

const positive = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined);

function limitOf(raw: unknown): SpendLimit | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const tokens = positive(r.tokens);
  const cost = positive(r.cost);
  if (tokens === undefined && cost === undefined) return undefined;
  return { ...(tokens !== undefined ? { tokens } : {}), ...(cost !== undefined ? { cost } : {}) };
}

/** The registered `aiSpend` as ceilings; undefined when none is set (the common case: nothing to read). */
export function toAiSpendCeilings(raw: unknown): AiSpendCeilings | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const perRun = limitOf(r.perRun);
  const w = r.perWindow as Record<string, unknown> | undefined;
  const windowMs = positive(w?.windowMs);
  const windowLimit = windowMs !== undefined ? limitOf(w) : undefined;
  if (!perRun && !windowLimit) return undefined;
  return { ...(perRun ? { perRun } : {}), ...(windowLimit ? { perWindow: { ...windowLimit, windowMs: windowMs! } } : {}) };
}

/** Registration's check of `aiSpend`: the message of what is wrong, or undefined when it is well formed. */
export function aiSpendProblem(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'aiSpend must be an object { perRun?, perWindow? }.';
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (k !== 'perRun' && k !== 'perWindow') return `aiSpend.${k} is not a ceiling (perRun, perWindow).`;
  for (const k of ['perRun', 'perWindow'] as const) {
    const l = r[k];
    if (l === undefined) continue;
    if (typeof l !== 'object' || l === null || Array.isArray(l)) return `aiSpend.${k} must be an object.`;
    const o = l as Record<string, unknown>;
    for (const f of ['tokens', 'cost'] as const) {
      if (o[f] !== undefined && positive(o[f]) === undefined) return `aiSpend.${k}.${f} must be a positive number.`;
    }
    if (o.tokens === undefined && o.cost === undefined) return `aiSpend.${k} needs tokens or cost.`;
  }
  const w = r.perWindow as Record<string, unknown> | undefined;
  if (w && (!Number.isInteger(w.windowMs) || (w.windowMs as number) < 1000)) return 'aiSpend.perWindow.windowMs must be an integer of at least 1000.';
  return undefined;
}

