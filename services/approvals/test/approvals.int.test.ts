import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);

const ARGS = { to: 'cfo@example.com', amount: 1200 };

describe.each(modes())('approvals: the gate, records and decisions (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  });
  afterAll(async () => h?.close());

  it('fails the step at once, with a clear error and no record, for every configuration it refuses', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{}, /needs a tool/],
      [{ tool: ' ' }, /needs a tool/],
      [{ tool: 'wire', onTimeout: 'explode' }, /onTimeout "explode" is not one of escalate, approve, reject, fail/],
      [{ tool: 'wire', if: 'args.amount >' }, /if "args.amount >" does not compile/],
      [{ tool: 'wire', if: 'args.amount' }, /must evaluate to a bool/],
      [{ tool: 'wire', minRisk: 'severe' }, /minRisk "severe" is not one of low, medium, high, critical/],
      [{ tool: 'wire', allow: [] }, /allow must be a non-empty array/],
      [{ tool: 'wire', allow: ['approve', 'veto'] }, /allow entry "veto"/],
      [{ tool: 'wire', timeoutMs: -5 }, /timeoutMs must be a non-negative finite number/],
    ];
    const sent = await Promise.all(cases.map(([op]) => h.handoff({ data: ARGS, ...op })));
    for (const [i, { runId, stepId }] of sent.entries()) {
      const [r] = await h.resolved(runId, stepId);
      expect(r!.error).toMatch(cases[i]![1]);
      expect(r!.data).toBeUndefined();
    }
    const rows = await h.db.query('select 1 from approvals.approvals where run_id = any($1::text[])', [sent.map((s) => s.runId)]);
    expect(rows).toHaveLength(0);
  });

  it('completes an ungated step at once with a result that says so (minRisk floor, CEL if, both)', async () => {
    const ungated = [
      { tool: 'wire', minRisk: 'high', risk: 'medium' },
      { tool: 'wire', if: 'args.amount > 5000' },
      { tool: 'wire', if: 'iteration >= 3', iteration: 2 },
      { tool: 'wire', if: 'tool == "wire"', minRisk: 'critical', risk: 'high' },
    ];
    for (const op of ungated) {
      const { runId, stepId } = await h.handoff({ data: ARGS, ...op });
      const [r] = await h.resolved(runId, stepId);
      expect(r!.data).toEqual({ gated: false, status: 'approved', args: ARGS });
      expect(await h.db.query('select 1 from approvals.approvals where run_id = $1', [runId])).toHaveLength(0);
    }
    // Nor is the scheduler told of a listing (its run never reads needsAttention): a gated hand-off after them
    // is the first and only ApprovalListed (one consumer, in stream order).
    const gated = await h.handoff({ tool: 'wire', data: ARGS });
    const a = await h.approvalOf(gated.runId);
    await until(() => h.listed.length > 0, 10_000, 'the ApprovalListed of the gated hand-off');
    expect(h.listed).toEqual([[`${gated.runId}/${gated.stepId}`, a.id]]);
  });

  it('records a gated approval once per (run, step), every SPEC field present or absent as its table says', async () => {
    const gated = [
      {},
      { minRisk: 'high', risk: 'high' },
      { minRisk: 'high' }, // risk absent under a floor: fails closed
      { minRisk: 'low', risk: 'unheard-of' },
      { if: 'args.amount > 1000 && risk == "high"', risk: 'high' },
      { if: 'iteration >= 3', iteration: 3 },
    ];
    for (const op of gated) {
      const { runId } = await h.handoff({ tool: 'send_payment', data: ARGS, ...op });
      expect(await h.approvalOf(runId)).toMatchObject({ status: 'pending', tool: 'send_payment', args: ARGS });
    }
    // The full record: annotations present, open fields absent.
    const runId = uniqueName('run');
    const full = { tool: 'send_payment', data: ARGS, risk: 'high', policy: 'finance-2', summary: 'Pay the invoice', context: { invoice: 'INV-7' }, escalatesTo: 'cfo', timeoutMs: 3_600_000, onTimeout: 'reject', allow: ['approve', 'reject'] };
    await h.handoff(full, { runId });
    const a = await h.approvalOf(runId);
    expect(a).toEqual({
      id: expect.stringMatching(/^apr_/), runId, workflow: 'agent', app: 'app', step: 'sign-off', tool: 'send_payment', args: ARGS,
      risk: 'high', policy: 'finance-2', summary: 'Pay the invoice', context: { invoice: 'INV-7' }, escalatesTo: 'cfo', onTimeout: 'reject',
      status: 'pending', allow: ['approve', 'reject'], requestedAt: expect.any(String), expiresAt: expect.any(String),
    });
    expect(Date.parse(a.expiresAt) - Date.parse(a.requestedAt)).toBe(3_600_000);
    // A redelivered hand-off (another msgId, as after the stream's dedupe window) changes nothing.
    const seen = h.primary.handled('approvals-requests');
    const again = await h.handoff({ ...full, summary: 'changed' }, { runId, msgId: uniqueName('again') });
    await until(() => h.primary.handled('approvals-requests') > seen, 10_000, 'the repeated hand-off handled');
    const bare = uniqueName('run');
    await h.handoff({ tool: 'lookup' }, { runId: bare });
    const b = await h.approvalOf(bare);
    const rows = await h.db.query<{ id: string; summary: string }>('select id, summary from approvals.approvals where run_id = $1', [again.runId]);
    expect(rows).toEqual([{ id: a.id, summary: 'Pay the invoice' }]);
    // No timeout: no expiresAt; defaults: onTimeout escalate, all four decisions; optional fields absent, never null.
    expect(b).toEqual({
      id: expect.any(String), runId: bare, workflow: 'agent', app: 'app', step: 'sign-off', tool: 'lookup', args: null,
      onTimeout: 'escalate', status: 'pending', allow: ['approve', 'edit', 'reject', 'respond'], requestedAt: expect.any(String),
    });
    // Nothing resolved the parked steps.
    expect(h.resolves.has(`${runId}/${again.stepId}`)).toBe(false);
  });

  it('lists newest first, filters by status and run, clamps limit, and refuses an unknown status or a non-integer limit', async () => {
    const ws = uniqueName('ws_list');
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { runId } = await h.handoff({ tool: `t${i}` }, { ws });
      runs.push(runId);
      await h.approvalOf(runId);
    }
    const call = (query: Record<string, unknown>) => h.call('approvals.list', { query }, { workspaceId: ws });
    const all = (await call({})).body;
    expect(all.map((a: any) => a.runId)).toEqual([...runs].reverse());
    for (let i = 1; i < all.length; i++) expect(all[i - 1].requestedAt >= all[i].requestedAt).toBe(true);
    expect((await call({ limit: '2' })).body.map((a: any) => a.runId)).toEqual([runs[4], runs[3]]);
    expect((await call({ limit: '0' })).body).toHaveLength(1);
    expect((await call({ limit: '5000' })).body).toHaveLength(5);
    expect((await call({ runId: runs[2] })).body.map((a: any) => a.tool)).toEqual(['t2']);
    expect((await call({ status: 'pending' })).body).toHaveLength(5);
    expect((await call({ status: 'approved' })).body).toHaveLength(0);
    expect(await call({ status: 'open' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_status' } } });
    for (const limit of ['1.5', 'ten', '']) {
      const res = await call({ limit });
      if (limit === '') expect(res.status).toBe(200);
      else expect(res).toMatchObject({ status: 400, body: { error: { code: 'invalid_limit' } } });
    }
    // Another workspace sees none of them, and reads one as 404.
    expect((await h.call('approvals.list', {}, { workspaceId: uniqueName('ws_other') })).body).toEqual([]);
    expect(await h.call('approvals.get', { params: { id: all[0].id } }, { workspaceId: uniqueName('ws_other') })).toMatchObject({ status: 404, body: { error: { code: 'approval_not_found' } } });
    expect(await h.call('approvals.get', { params: { id: 'apr_nope' } })).toMatchObject({ status: 404, body: { error: { code: 'approval_not_found' } } });
  });

  it('approve with edits: the record keeps editedArgs, the decider is the caller, and the workflow receives the edited args', async () => {
    const { runId, stepId } = await h.handoff({ tool: 'send_payment', data: ARGS });
    const a = await h.approvalOf(runId);
    const edited = { to: 'cfo@example.com', amount: 900 };
    const res = await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved', args: edited, decidedBy: 'mallory', decidedVia: 'timeout' } }, { actor: 'alice', via: 'console' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: a.id, status: 'approved', args: ARGS, editedArgs: edited, decidedBy: 'alice', decidedVia: 'console', decidedAt: expect.any(String) });
    expect(res.body.response).toBeUndefined();
    const [r, ...more] = await h.resolved(runId, stepId);
    expect(more).toHaveLength(0);
    expect(r!.data).toEqual({ gated: true, approvalId: a.id, status: 'approved', args: edited, decidedBy: 'alice', decidedVia: 'console' });
    // Decided approvals stay listable: the audit trail.
    expect((await h.call('approvals.get', { params: { id: a.id } })).body).toEqual(res.body);
    // The second decision loses: 409.
    expect(await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'denied' } })).toMatchObject({ status: 409, body: { error: { code: 'approval_not_open' } } });
  });

  it('deny with a response, over each channel (api default, mcp, unrecorded), and the 400s allow and the body rule out', async () => {
    for (const via of [undefined, 'mcp', 'unrecorded'] as const) {
      const { runId, stepId } = await h.handoff({ tool: 'delete_db', data: { db: 'prod' } });
      const a = await h.approvalOf(runId);
      const res = await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'denied', response: 'Not on a Friday.' } }, { actor: 'key-ci', ...(via ? { via } : {}) });
      expect(res.body).toMatchObject({ status: 'denied', decidedBy: 'key-ci', decidedVia: via ?? 'api', response: 'Not on a Friday.' });
      expect(res.body.editedArgs).toBeUndefined();
      const [r] = await h.resolved(runId, stepId);
      expect(r!.data).toEqual({ gated: true, approvalId: a.id, status: 'denied', args: { db: 'prod' }, decidedBy: 'key-ci', decidedVia: via ?? 'api', response: 'Not on a Friday.' });
    }
    const { runId } = await h.handoff({ tool: 'deploy', allow: ['approve', 'reject'] });
    const a = await h.approvalOf(runId);
    const bad = [
      { status: 'cancelled' },
      { status: 'maybe' },
      {},
      { status: 'denied', args: { x: 1 } },
      { status: 'approved', args: { x: 1 } }, // allow lacks edit
      { status: 'approved', response: 'ok' }, // allow lacks respond
    ];
    for (const body of bad) {
      expect({ body, res: await h.call('approvals.decide', { params: { id: a.id }, body }) }).toMatchObject({ body, res: { status: 400, body: { error: { code: 'invalid_decision' } } } });
    }
    const only = await h.handoff({ tool: 'deploy', allow: ['reject'] });
    const o = await h.approvalOf(only.runId);
    expect(await h.call('approvals.decide', { params: { id: o.id }, body: { status: 'approved' } })).toMatchObject({ status: 400, body: { error: { code: 'invalid_decision' } } });
    expect(await h.call('approvals.decide', { params: { id: 'apr_nope' }, body: { status: 'approved' } })).toMatchObject({ status: 404, body: { error: { code: 'approval_not_found' } } });
    expect(await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved' } }, { workspaceId: uniqueName('ws_other') })).toMatchObject({ status: 404 });
    // Still open after all the refusals.
    expect((await h.call('approvals.get', { params: { id: a.id } })).body.status).toBe('pending');
  });

  it('a run that went terminal under open approvals cancels them with no decision; decided ones stay as they are', async () => {
    const runId = uniqueName('run');
    await h.handoff({ tool: 'a' }, { runId, step: 'first' });
    await h.handoff({ tool: 'b', timeoutMs: 3_600_000 }, { runId, step: 'second' });
    await h.handoff({ tool: 'c' }, { runId, step: 'third' });
    await until(async () => (await h.db.query('select 1 from approvals.approvals where run_id = $1', [runId])).length === 3, 10_000, 'three approvals');
    const list = async () => (await h.call('approvals.list', { query: { runId } })).body as any[];
    const third = (await list()).find((a) => a.tool === 'c');
    expect((await h.call('approvals.decide', { params: { id: third.id }, body: { status: 'approved' } })).status).toBe(200);
    await h.runFinished(runId, 'cancelled');
    await until(async () => (await list()).filter((a) => a.status === 'cancelled').length === 2, 10_000, 'open approvals cancelled');
    for (const a of await list()) {
      if (a.tool === 'c') expect(a).toMatchObject({ status: 'approved', decidedBy: 'key-ci' });
      else {
        expect(a.status).toBe('cancelled');
        for (const k of ['decidedAt', 'decidedBy', 'decidedVia', 'editedArgs']) expect(a[k]).toBeUndefined();
      }
    }
    const cancelled = (await list()).find((a) => a.tool === 'a');
    expect(await h.call('approvals.decide', { params: { id: cancelled.id }, body: { status: 'approved' } })).toMatchObject({ status: 409, body: { error: { code: 'approval_not_open' } } });
    // The cancelled one's timer is disarmed: it never fires.
    const [row] = await h.db.query<{ timer_at: unknown }>("select timer_at from approvals.approvals where run_id = $1 and tool = 'b'", [runId]);
    expect(row!.timer_at).toBeNull();
  });
});
