import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ApprovalDecision } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * Human approvals through the public API with the SDK: an agent's risky tool
 * call parks its run, the approval is listed, a secret key approves it with
 * edited args, and the run carries out the call with them; a low-risk call
 * passes ungated. Then an approval whose timeout approves on its own. On
 * `pnpm dev` (embedded) and on the six-process fleet.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: only the embedded approvals test runs (fleet SKIPPED) !!!\n');

/**
 * The name the gateway's bootstrap gives the key of SERVICE_DEV_SECRET_KEY
 * (services/gateway/src/domain/bootstrap.ts: `dev-${kind}`); a decision made
 * with that key is recorded as decided by it.
 */
const DEV_SECRET_KEY_NAME = 'dev-secret';

interface Refund {
  orderId: string;
  amount: number;
}

describe.each(modes)('approvals on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  const refunds: Refund[] = [];

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      r.workflow<Refund>('refund-agent', { triggers: [{ event: 'support.refund_requested' }] }, async ({ event, step }) => {
        // Low risk under a high floor: not gated, resolves at once with the proposed args.
        const lookup = await step.approval('lookup-gate', {
          tool: 'lookup_order',
          args: { orderId: event.data.orderId },
          risk: 'low',
          minRisk: 'high',
        });
        const decision = await step.approval<Refund>('refund-gate', {
          tool: 'refund',
          args: event.data,
          risk: 'high',
          minRisk: 'high',
          iteration: 1,
          summary: `Refund ${event.data.amount} on ${event.data.orderId}`,
          policy: 'refunds need a human',
        });
        const done =
          decision.status === 'approved'
            ? await step.run('refund', () => {
                refunds.push(decision.args);
                return { refunded: decision.args.amount, orderId: decision.args.orderId };
              })
            : null;
        return { lookup, decision, done };
      });
      r.workflow<{ version: number }>('timed-deploy', { triggers: [{ event: 'ops.deploy_requested' }] }, async ({ event, step }) =>
        step.approval('deploy-gate', { tool: 'deploy', args: { version: event.data.version }, timeout: '1s', onTimeout: 'approve' }),
      );
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  const send = async (name: string, data: unknown): Promise<string> => {
    const res = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data } });
    expect(res.status).toBe(202);
    return res.body.runId as string;
  };
  const runOf = async (runId: string) => (await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.publicKey })).body;

  it('parks a run on a gated call, lists it, approves it with edits, and the run finishes with the edited args', async () => {
    const orderId = `o-${Date.now()}`;
    const runId = await send('support.refund_requested', { orderId, amount: 500 });

    // Parked on a human: waiting, with needsAttention (SPEC's needs_attention state).
    const parked = await eventually('the run to park on the approval', async () => {
      // A run that ended instead of parking fails the wait at once, with its error.
      const run = runReached(await runOf(runId), ['queued', 'running', 'waiting']);
      return run?.status === 'waiting' && run.needsAttention === true ? run : undefined;
    });
    expect(parked).toMatchObject({ id: runId, status: 'waiting', needsAttention: true, workflow: 'refund-agent' });

    // A run reads needsAttention only once the approvals service has listed its approval: listed at once.
    const listed = await api(dep.base, 'GET', `/v1/approvals?runId=${runId}`, { key: dep.publicKey });
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(1);
    const approval = listed.body[0];
    expect(approval).toEqual({
      id: expect.stringMatching(/^apr_/),
      runId,
      workflow: 'refund-agent',
      app: 'default',
      step: 'refund-gate',
      tool: 'refund',
      args: { orderId, amount: 500 },
      risk: 'high',
      policy: 'refunds need a human',
      summary: `Refund 500 on ${orderId}`,
      onTimeout: 'escalate',
      status: 'pending',
      allow: ['approve', 'edit', 'reject', 'respond'],
      requestedAt: expect.any(String),
    });
    // Only the gated call made a record: the low-risk lookup passed without one.
    const pending = await api(dep.base, 'GET', '/v1/approvals?status=pending', { key: dep.publicKey });
    expect(pending.body.map((a: { id: string }) => a.id)).toContain(approval.id);
    const one = await api(dep.base, 'GET', `/v1/approvals/${approval.id}`, { key: dep.publicKey });
    expect([one.status, one.body]).toEqual([200, approval]);

    const decide = (key: string, body: unknown) => api(dep.base, 'POST', `/v1/approvals/${approval.id}/decision`, { key, body });
    const edited = { orderId, amount: 40 };

    const byPublic = await decide(dep.publicKey, { status: 'approved', args: edited });
    expect(byPublic.status).toBe(403);
    expect(byPublic.body.error.code).toEqual(expect.any(String));
    // Still open: the refused call changed nothing.
    expect((await api(dep.base, 'GET', `/v1/approvals/${approval.id}`, { key: dep.publicKey })).body.status).toBe('pending');

    // decidedBy / decidedVia in the body are ignored: the caller is the decider.
    const decided = await decide(dep.secretKey, { status: 'approved', args: edited, decidedBy: 'mallory', decidedVia: 'console' });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({
      id: approval.id,
      status: 'approved',
      args: { orderId, amount: 500 },
      editedArgs: edited,
      decidedBy: DEV_SECRET_KEY_NAME,
      decidedVia: 'api',
      decidedAt: expect.any(String),
    });

    const again = await decide(dep.secretKey, { status: 'denied' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('approval_not_open');

    const run = await eventually('the run to succeed', async () => runReached(await runOf(runId)));
    const result = run.result as { lookup: ApprovalDecision; decision: ApprovalDecision<Refund>; done: unknown };
    expect(result.lookup).toEqual({ gated: false, status: 'approved', args: { orderId } });
    expect(result.decision).toEqual({
      gated: true,
      approvalId: approval.id,
      status: 'approved',
      args: edited,
      decidedBy: DEV_SECRET_KEY_NAME,
      decidedVia: 'api',
    });
    expect(result.done).toEqual({ refunded: 40, orderId });
    expect(run.needsAttention).toBeUndefined();
    // The tool ran once, with the edited args.
    expect(refunds.filter((r) => r.orderId === orderId)).toEqual([edited]);

    // The decided approval stays listable as the audit trail.
    const after = await api(dep.base, 'GET', `/v1/approvals/${approval.id}`, { key: dep.publicKey });
    expect(after.body).toMatchObject({ status: 'approved', editedArgs: edited, decidedBy: DEV_SECRET_KEY_NAME, decidedVia: 'api' });
    const approved = await api(dep.base, 'GET', `/v1/approvals?status=approved&runId=${runId}`, { key: dep.publicKey });
    expect(approved.body.map((a: { id: string }) => a.id)).toEqual([approval.id]);
  }, 90_000);

  it('approves on its own at the timeout with onTimeout approve, decided by system:timeout', async () => {
    const runId = await send('ops.deploy_requested', { version: 7 });
    const run = await eventually('the timed run to succeed', async () => runReached(await runOf(runId)), 60_000);
    expect(run.result).toEqual({
      gated: true,
      approvalId: expect.stringMatching(/^apr_/),
      status: 'approved',
      args: { version: 7 },
      decidedBy: 'system:timeout',
      decidedVia: 'timeout',
    });
    const record = await api(dep.base, 'GET', `/v1/approvals/${run.result.approvalId}`, { key: dep.publicKey });
    expect(record.status).toBe(200);
    expect(record.body).toMatchObject({
      runId,
      step: 'deploy-gate',
      onTimeout: 'approve',
      status: 'approved',
      decidedBy: 'system:timeout',
      decidedVia: 'timeout',
      expiresAt: expect.any(String),
      decidedAt: expect.any(String),
    });
    expect(record.body.editedArgs).toBeUndefined();
    // A decision after the timeout resolved it has lost: 409.
    const late = await api(dep.base, 'POST', `/v1/approvals/${run.result.approvalId}/decision`, {
      key: dep.secretKey,
      body: { status: 'denied' },
    });
    expect([late.status, late.body.error?.code]).toEqual([409, 'approval_not_open']);
  }, 90_000);

  it('cancels the open approval of a run cancelled under it, with no decision on record', async () => {
    const runId = await send('support.refund_requested', { orderId: `c-${Date.now()}`, amount: 9 });
    await eventually('the run to park on the approval', async () => {
      const run = runReached(await runOf(runId), ['queued', 'running', 'waiting']);
      return run?.needsAttention === true ? run : undefined;
    });
    const [approval] = (await api(dep.base, 'GET', `/v1/approvals?runId=${runId}`, { key: dep.publicKey })).body;
    expect(approval.status).toBe('pending');
    const cancel = await api(dep.base, 'POST', `/v1/runs/${runId}/cancel`, { key: dep.secretKey });
    expect([cancel.status, cancel.body.status]).toEqual([200, 'cancelled']);
    // SPEC Approval rule 2: the run went terminal under it.
    const closed = await eventually('the approval to be cancelled', async () => {
      const a = (await api(dep.base, 'GET', `/v1/approvals/${approval.id}`, { key: dep.publicKey })).body;
      return a.status === 'cancelled' ? a : undefined;
    });
    expect(closed.decidedBy).toBeUndefined();
    const late = await api(dep.base, 'POST', `/v1/approvals/${approval.id}/decision`, { key: dep.secretKey, body: { status: 'approved' } });
    expect([late.status, late.body.error?.code]).toEqual([409, 'approval_not_open']);
  }, 90_000);

  it('answers bad reads with the error codes', async () => {
    const badStatus = await api(dep.base, 'GET', '/v1/approvals?status=maybe', { key: dep.publicKey });
    expect(badStatus.status).toBe(400);
    const missing = await api(dep.base, 'GET', '/v1/approvals/apr_missing', { key: dep.publicKey });
    expect([missing.status, missing.body.error?.code]).toEqual([404, 'approval_not_found']);
    const noKey = await api(dep.base, 'GET', '/v1/approvals');
    expect(noKey.status).toBe(401);
  }, 30_000);
});
