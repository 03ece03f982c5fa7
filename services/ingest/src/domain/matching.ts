import { celMatches, type CancelOnSpec, type WorkflowPolicy } from '@dws/cel';

export interface Trigger {
  app: string;
  workflow: string;
  event: string;
  isPrefix: boolean;
  ifExpr: string;
}

/** A workflow's event triggers as index rows. No triggers list means an implicit trigger on the name; cron adds none. */
export function triggersOf(app: string, workflow: string, policy: Pick<WorkflowPolicy, 'events'>): Trigger[] {
  if (!policy.events) return [{ app, workflow, event: workflow, isPrefix: false, ifExpr: '' }];
  return policy.events.map((t) => ({ app, workflow, event: t.event, isPrefix: t.isPrefix, ifExpr: t.if }));
}

/**
 * The workflows an event starts (SPEC Events 2): exact name or prefix, the
 * optional CEL `if` over the event, only the `scope` app's triggers when
 * given. One entry per workflow, however many of its triggers match.
 */
export function matchTriggers(
  all: readonly Trigger[],
  ev: { name: string; data: unknown; scope?: string | undefined },
): { app: string; workflow: string }[] {
  const { scope } = ev;
  const seen = new Set<string>();
  const out: { app: string; workflow: string }[] = [];
  for (const t of all) {
    if (scope !== undefined && t.app !== scope) continue;
    if (t.isPrefix ? !ev.name.startsWith(t.event) : ev.name !== t.event) continue;
    const key = `${t.app}\u0000${t.workflow}`;
    if (seen.has(key)) continue;
    if (t.ifExpr && !celMatches(t.ifExpr, { event: { name: ev.name, data: ev.data } })) continue;
    seen.add(key);
    out.push({ app: t.app, workflow: t.workflow });
  }
  return out;
}

/** A workflow's cancelOn entry as an index row. */
export interface CancelTrigger extends CancelOnSpec {
  app: string;
  workflow: string;
}

/** What a matching event asks the scheduler to cancel: the workflow's active runs that `if` selects, created within `withinMs` (0: any). */
export interface CancelMatch {
  app: string;
  workflow: string;
  if: string;
  withinMs: number;
}

export function cancelsOf(app: string, workflow: string, policy: Pick<WorkflowPolicy, 'cancelOn'>): CancelTrigger[] {
  return (policy.cancelOn ?? []).map((c) => ({ app, workflow, ...c }));
}

/**
 * The cancelOn entries an event matches: by name or prefix, only the `scope`
 * app's when given (as triggers). Their `if` reads the run's own event too,
 * so it is the scheduler's to evaluate, run by run.
 */
export function matchCancels(all: readonly CancelTrigger[], ev: { name: string; scope?: string | undefined }): CancelMatch[] {
  const out: CancelMatch[] = [];
  for (const c of all) {
    if (ev.scope !== undefined && c.app !== ev.scope) continue;
    if (c.isPrefix ? !ev.name.startsWith(c.event) : ev.name !== c.event) continue;
    out.push({ app: c.app, workflow: c.workflow, if: c.if, withinMs: c.withinMs });
  }
  return out;
}
