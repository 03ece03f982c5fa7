import { celMatches, type WorkflowPolicy } from '@dws/cel';

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
