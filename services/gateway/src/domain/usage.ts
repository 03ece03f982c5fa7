/**
 * Usage ceilings of a workspace (SPEC Limits: "Usage or plan ceiling |
 * metered | Workspace becomes suspended"; there is no 429). Pure rules: the
 * store counts, this module decides what the counts mean.
 */

/**
 * The limit names PATCH /v1/admin/workspaces/{id} accepts, with what each
 * one caps. The body schema and its OpenAPI text are built from this list;
 * a new name needs a meter feeding `Usage` and a line in `overCeiling`.
 */
export const LIMITS = {
  runsPerMonth: {
    integer: true,
    description:
      'Runs that ended (succeeded, failed or cancelled) in the current UTC calendar month. Reaching it suspends the workspace ' +
      '(suspendedReason usage_limit) until the month turns or the limit is raised or removed.',
  },
  modelTokensPerMonth: {
    integer: true,
    description:
      "Model tokens (in + out) the workspace's steps recorded in the current UTC month (Infer steps and step.ai.wrap usage, as GET /v1/usage counts them). " +
      'A model call the service would make at or past it is not made: its step fails saying so, and the workspace is suspended (usage_limit) ' +
      'until the month turns or the limit is raised above what was used.',
  },
  modelCostPerMonth: {
    integer: false,
    description:
      "Priced cost of the model calls the workspace's steps recorded in the current UTC month (the Usage cost a runner reports with step.ai.wrap; " +
      "the service's own Infer calls are unpriced and count 0). " +
      'Enforced like modelTokensPerMonth.',
  },
} as const;

export type LimitName = keyof typeof LIMITS;
export type LimitsPatch = Partial<Record<LimitName, number | null>>;

/** Why a workspace is suspended: an operator's PATCH, or a metered ceiling the meter (or a PATCH lowering it) found reached. */
export type SuspendedReason = 'operator' | 'usage_limit';

export interface Suspension {
  suspended: boolean;
  reason: SuspendedReason | null;
}

/** What the meter has counted for a workspace in the current month. */
export interface Usage {
  month: string;
  runs: number;
  /**
   * The month's model usage as the scheduler reported it when it refused a
   * model call at a ceiling (the live figure is GET /v1/usage's); absent
   * until a call was refused this month.
   */
  model?: { tokens: number; cost: number };
}

/** The UTC calendar month of an instant, `YYYY-MM`: the key usage is counted under. */
export function monthOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/** The month before `month` (`YYYY-MM`). */
export function previousMonth(month: string): string {
  const [y, m] = month.split('-').map(Number) as [number, number];
  return monthOf(Date.UTC(y, m - 2, 1));
}

/** A stored limit as a ceiling: only positive numbers (integers where the limit counts) count; rows written before validation may hold anything. */
export function ceiling(limits: Record<string, unknown>, name: LimitName): number | undefined {
  const v = limits[name];
  return typeof v === 'number' && Number.isFinite(v) && v > 0 && (!LIMITS[name].integer || Number.isInteger(v)) ? v : undefined;
}

/**
 * True when some ceiling is reached: a ceiling of N admits N runs, then the
 * workspace stops starting new ones; a model ceiling counts as reached once
 * the scheduler refused a call at it this month and it is still at or under
 * what was used then.
 */
export function overCeiling(limits: Record<string, unknown>, usage: Usage): boolean {
  const runs = ceiling(limits, 'runsPerMonth');
  if (runs !== undefined && usage.runs >= runs) return true;
  if (!usage.model) return false;
  const tokens = ceiling(limits, 'modelTokensPerMonth');
  const cost = ceiling(limits, 'modelCostPerMonth');
  return (tokens !== undefined && usage.model.tokens >= tokens) || (cost !== undefined && usage.model.cost >= cost);
}

/** Limits after a PATCH: merged, a null value removes that limit. */
export function mergeLimits(current: Record<string, unknown>, patch: LimitsPatch): Record<string, unknown> {
  const out: Record<string, unknown> = { ...current };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else if (v !== undefined) out[k] = v;
  }
  return out;
}

/** An operator's `suspended` in a PATCH: true suspends as the operator's own act, false clears any suspension. */
export function operatorChange(current: Suspension, suspended: boolean | undefined): Suspension {
  if (suspended === undefined) return current;
  return suspended ? { suspended: true, reason: 'operator' } : { suspended: false, reason: null };
}

/**
 * The suspension a workspace should have given its limits and usage.
 * Only a usage suspension is ever lifted here; an operator's (or one with no
 * recorded reason, from before reasons were kept) stays until an operator
 * lifts it. A workspace still at its ceiling stays suspended even if an
 * operator asked to lift it: raising or removing the limit is the way.
 */
export function settleSuspension(s: Suspension, limits: Record<string, unknown>, usage: Usage): Suspension {
  if (s.suspended && s.reason !== 'usage_limit') return s;
  if (overCeiling(limits, usage)) return { suspended: true, reason: 'usage_limit' };
  return s.suspended ? { suspended: false, reason: null } : s;
}
