/**
 * The opcodes this service can see through to the end: the one place that
 * says so. Approval is completed by services/approvals, Infer by the
 * invoker's model calls (both answer with ResolveStep). A step whose opcode
 * is not here fails at once, not retriable, with a message saying what is
 * missing (SPEC: "An unrecognized op fails the step rather than re-invoking
 * forever").
 */
export const COMPLETABLE_OPS: ReadonlySet<string> = new Set([
  'StepRun', 'Sleep', 'SleepUntil', 'WaitForEvent', 'RunWorkflow', 'Emit', 'Webhook', 'Score', 'Approval', 'Infer', 'Tag',
]);

/** Why a known opcode cannot be completed yet (ops SPEC defines but this service lacks the engine for): none today. */
const MISSING: Readonly<Record<string, string>> = {};

/**
 * The step's error when SPEC defines `op` but this service cannot complete
 * it yet; undefined otherwise. (An op SPEC does not define at all is not a
 * gap: decide() fails that step as unrecognized.)
 */
export function capabilityGap(op: string): string | undefined {
  return !COMPLETABLE_OPS.has(op) && Object.hasOwn(MISSING, op) ? MISSING[op] : undefined;
}
