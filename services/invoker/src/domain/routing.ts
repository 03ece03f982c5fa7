import type { RunnerRow } from '../store/runners.js';

/**
 * SPEC Routing: a pinned run goes only to its runner id; anycast picks a
 * random live runner of the app that serves the workflow (any replica is
 * safe because the full memo is resent). Runners in `avoid` (recently
 * unreachable, or already tried for this invoke) are picked only when no
 * other capable runner is left.
 */
export function pickRunner(
  candidates: RunnerRow[],
  workflow: string,
  pinned: string,
  avoid: ReadonlySet<string> = new Set(),
  rnd = Math.random,
): RunnerRow | undefined {
  if (pinned) return candidates.find((r) => r.id === pinned && r.workflows.includes(workflow));
  const capable = candidates.filter((r) => r.workflows.includes(workflow));
  const preferred = capable.filter((r) => !avoid.has(r.id));
  const pool = preferred.length > 0 ? preferred : capable;
  if (pool.length === 0) return undefined;
  return pool[Math.floor(rnd() * pool.length)];
}
