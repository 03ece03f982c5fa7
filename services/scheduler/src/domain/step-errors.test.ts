import { describe, expect, it } from '@jest/globals';
import { withParsedBody } from './reply.js';
import { hasInfer, hasStepError } from './step-errors.js';

const reply = (body: unknown) => withParsedBody({ kind: 'reply', status: 206, body: JSON.stringify(body) });

describe('hasStepError', () => {
  it('is true only for a reply carrying an opcode with an error', () => {
    expect(hasStepError(reply({ opcodes: [{ op: 'StepRun', id: 'a', data: 1 }, { op: 'StepRun', id: 'b', error: { message: 'x' } }], logs: [] }))).toBe(true);
    expect(hasStepError(reply([{ op: 'StepRun', id: 'b', error: { message: 'x' } }]))).toBe(true);
    expect(hasStepError(reply({ opcodes: [{ op: 'StepRun', id: 'a', data: 1 }], logs: [] }))).toBe(false);
    expect(hasStepError(reply({ data: { error: 'not a step' }, logs: [] }))).toBe(false);
    expect(hasStepError(withParsedBody({ kind: 'reply', status: 206, body: 'not json' }))).toBe(false);
    expect(hasStepError({ kind: 'transport_error', error: 'down' })).toBe(false);
  });
});

describe('hasInfer', () => {
  it('is true only for a reply asking for a model call', () => {
    expect(hasInfer(reply({ opcodes: [{ op: 'StepRun', id: 'a', data: 1 }, { op: 'Infer', id: 'b', data: {} }], logs: [] }))).toBe(true);
    expect(hasInfer(reply([{ op: 'Infer', id: 'b', data: {} }]))).toBe(true);
    expect(hasInfer(reply({ opcodes: [{ op: 'StepRun', id: 'a', data: { op: 'Infer' } }], logs: [] }))).toBe(false);
    expect(hasInfer({ kind: 'transport_error', error: 'down' })).toBe(false);
  });
});
