import type { PassOutcome } from './reply.js';

/**
 * Whether a pass reported a failed step: only then does its decision read
 * the workflow's retry policy (the engine reads it fresh from storage, so
 * the common pass pays no read and a new registration is never stale).
 * Takes the outcome after `withParsedBody`.
 */
export function hasStepError(outcome: PassOutcome): boolean {
  return opcodesOf(outcome).some((op) => typeof op === 'object' && op !== null && (op as { error?: unknown }).error !== undefined);
}

/** True when the reply asks the service for a model call (an Infer opcode): AI spend ceilings are read only then. */
export function hasInfer(outcome: PassOutcome): boolean {
  return opcodesOf(outcome).some((op) => typeof op === 'object' && op !== null && (op as { op?: unknown }).op === 'Infer');
}

function opcodesOf(outcome: PassOutcome): unknown[] {
  if (outcome.kind !== 'reply' || typeof outcome.parsed !== 'object' || outcome.parsed === null) return [];
  // Version 1 wraps opcodes in { opcodes }; version 0 sent a bare array.
  const ops = Array.isArray(outcome.parsed) ? outcome.parsed : (outcome.parsed as { opcodes?: unknown }).opcodes;
  return Array.isArray(ops) ? ops : [];
}
