import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { parseInvokeReply, parseInvokeRequestBody, parseMemoEntry } from './parse.js';
import { isKnownOpcode, OPCODES, type InvokeReply200, type InvokeReply206, type InvokeRequestBody } from './wire.js';

const golden = JSON.parse(readFileSync(new URL('../test/fixtures/invoke.json', import.meta.url), 'utf8')) as {
  request: InvokeRequestBody;
  reply200: InvokeReply200;
  reply206: InvokeReply206;
  reply400: { error: { message: string; stack: string }; logs: [] };
};

describe('parseInvokeRequestBody', () => {
  it('accepts the golden request unchanged', () => {
    expect(parseInvokeRequestBody(golden.request)).toEqual({ ok: true, value: golden.request });
  });

  it('defaults ctx.runner to the empty string (anycast)', () => {
    const { runner: _drop, ...ctx } = golden.request.ctx;
    const r = parseInvokeRequestBody({ ...golden.request, ctx });
    expect(r.ok && r.value.ctx.runner).toBe('');
  });

  it.each([
    ['not an object', 42],
    ['no ctx', { event: { name: 'e', data: {} }, steps: {} }],
    ['no workflow', { ...golden.request, ctx: { ...golden.request.ctx, workflow: '' } }],
    ['bad attempt', { ...golden.request, ctx: { ...golden.request.ctx, attempt: -1 } }],
    ['steps an array', { ...golden.request, steps: [] }],
    ['memo entry with two fields', { ...golden.request, steps: { k: { data: 1, pending: true } } }],
    ['memo entry with neither', { ...golden.request, steps: { k: {} } }],
    ['pending false', { ...golden.request, steps: { k: { pending: false } } }],
  ])('rejects %s', (_name, body) => {
    expect(parseInvokeRequestBody(body).ok).toBe(false);
  });
});

describe('parseMemoEntry', () => {
  it('keeps a null result as data', () => {
    expect(parseMemoEntry({ data: null })).toEqual({ ok: true, value: { data: null } });
  });
});

describe('parseInvokeReply', () => {
  it('classifies the golden replies', () => {
    expect(parseInvokeReply(200, golden.reply200)).toEqual({
      ok: true,
      value: { kind: 'complete', ...golden.reply200 },
    });
    expect(parseInvokeReply(206, golden.reply206)).toEqual({ ok: true, value: { kind: 'steps', ...golden.reply206 } });
    expect(parseInvokeReply(400, golden.reply400)).toEqual({
      ok: true,
      value: { kind: 'failed', status: 400, retriable: false, error: golden.reply400.error, logs: [] },
    });
    expect(parseInvokeReply(500, 'not json')).toEqual({
      ok: true,
      value: { kind: 'failed', status: 500, retriable: true, logs: [] },
    });
  });

  it('keeps an unknown op (it fails the step, not the invoke) but refuses a shapeless opcode', () => {
    const withUnknown = { opcodes: [{ op: 'Teleport', id: 'h', name: 'n' }], logs: [] };
    const r = parseInvokeReply(206, withUnknown);
    expect(r.ok && r.value.kind === 'steps' && isKnownOpcode(r.value.opcodes[0]!.op)).toBe(false);
    expect(parseInvokeReply(206, { opcodes: [{ op: 'StepRun' }] }).ok).toBe(false);
    expect(parseInvokeReply(206, [])).toMatchObject({ ok: false });
    expect(parseInvokeReply(200, { logs: [] }).ok).toBe(false);
    expect(parseInvokeReply(302, {}).ok).toBe(false);
  });

  it('drops malformed log lines', () => {
    const r = parseInvokeReply(200, {
      data: 1,
      logs: [{ level: 'loud', message: 'x', scope: '@root', index: 0 }, golden.reply200.logs[0]],
    });
    expect(r.ok && r.value.logs).toEqual(golden.reply200.logs);
  });
});

describe('OPCODES', () => {
  it('lists the ten ops of the SPEC table, then the extension Tag', () => {
    expect(OPCODES).toEqual([
      'StepRun',
      'Sleep',
      'SleepUntil',
      'WaitForEvent',
      'RunWorkflow',
      'Emit',
      'Webhook',
      'Approval',
      'Infer',
      'Score',
      'Tag',
    ]);
  });
});
