import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createLogger } from '@dws/log';
import type { Outbox } from '@dws/runtime';
import { recordingDb, uniqueName } from '@dws/testing';
import { Timers } from '../src/handlers/timers.js';
import { modes, startHarness, until, type Harness, type Replica } from './harness.js';

jest.setTimeout(90_000);

const ARGS = { amount: 40 };
const HOUR = 3_600_000;

describe.each(modes())('approvals: timeouts, races and crashes (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
  });
  afterAll(async () => h?.close());

  /** Publishes of a step's ResolveStep across `replicas`. */
  const publishes = (replicas: Replica[], runId: string, stepId: string) =>
    replicas.reduce((n, r) => n + (r.published.get(`resolve:${runId}:${stepId}`) ?? 0), 0);

  it('with no timer armed, looks once (one statement, outside any transaction) and sleeps', async () => {
    // First in the file: no timer is armed yet.
    const { db, calls } = recordingDb(h.db);
    const timers = new Timers({ db, log: createLogger({ level: 'silent' }), outbox: {} as Outbox }); // the default longest sleep
    timers.start();
    try {
      await until(async () => calls.length > 0, 5_000, 'the first look');
      await new Promise((r) => setTimeout(r, 1000)); // it looked every 250 ms before
      expect(calls).toEqual(['query']);
    } finally {
      await timers.stop();
    }
  });

  it('onTimeout escalate: escalated at expiresAt, escalatesTo kept, no step resolved, still decidable', async () => {
    const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS, timeoutMs: 200, escalatesTo: 'cfo' });
    const a = await h.approvalOf(runId);
    expect(a.status).toBe('pending');
    await until(async () => (await h.call('approvals.get', { params: { id: a.id } })).body.status === 'escalated', 10_000, 'escalated');
    const e = (await h.call('approvals.get', { params: { id: a.id } })).body;
    expect(e).toMatchObject({ status: 'escalated', escalatesTo: 'cfo', onTimeout: 'escalate', expiresAt: a.expiresAt });
    for (const k of ['decidedAt', 'decidedBy', 'decidedVia']) expect(e[k]).toBeUndefined();
    expect(h.resolves.has(`${runId}/${stepId}`)).toBe(false);
    const [row] = await h.db.query<{ timer_at: unknown }>('select timer_at from approvals.approvals where id = $1', [a.id]);
    expect(row!.timer_at).toBeNull(); // no further timer
    const res = await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved' } }, { actor: 'cfo', via: 'console' });
    expect(res.body).toMatchObject({ status: 'approved', decidedBy: 'cfo', decidedVia: 'console', escalatesTo: 'cfo' });
    expect((await h.resolved(runId, stepId))[0]!.data).toMatchObject({ status: 'approved', decidedVia: 'console' });
  });

  it('onTimeout approve / reject decide as system:timeout via timeout (approved / denied); fail cancels and fails the step', async () => {
    const cases = [
      ['approve', 'approved'],
      ['reject', 'denied'],
    ] as const;
    for (const [onTimeout, status] of cases) {
      const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS, timeoutMs: 100, onTimeout });
      const [r] = await h.resolved(runId, stepId);
      const a = await h.approvalOf(runId);
      expect(a).toMatchObject({ status, decidedBy: 'system:timeout', decidedVia: 'timeout', decidedAt: expect.any(String), onTimeout });
      expect(a.editedArgs).toBeUndefined();
      expect(r!.data).toEqual({ gated: true, approvalId: a.id, status, args: ARGS, decidedBy: 'system:timeout', decidedVia: 'timeout' });
      expect(await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved' } })).toMatchObject({ status: 409, body: { error: { code: 'approval_not_open' } } });
    }
    const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS, timeoutMs: 0, onTimeout: 'fail' });
    const [r] = await h.resolved(runId, stepId);
    const a = await h.approvalOf(runId);
    expect(r!.error).toBe(`Approval ${a.id} (wire) timed out: onTimeout is fail.`);
    expect(a.status).toBe('cancelled');
    for (const k of ['decidedAt', 'decidedBy', 'decidedVia']) expect(a[k]).toBeUndefined();
  });

  it('fires each timeout exactly once with two replicas polling', async () => {
    const second = await h.replica();
    const replicas = [h.primary, second];
    try {
      const sent = await Promise.all(
        Array.from({ length: 30 }, (_, i) => h.handoff({ tool: 'wire', data: { i }, timeoutMs: 150 + (i % 5) * 20, onTimeout: i % 2 ? 'approve' : 'fail' })),
      );
      for (const { runId, stepId } of sent) await h.resolved(runId, stepId);
      // Every outbox row published and deleted: nothing more can come out of either replica.
      await until(async () => (await h.db.query('select 1 from approvals.outbox limit 1')).length === 0, 15_000, 'the outboxes to drain');
      for (const { runId, stepId } of sent) {
        expect({ runId, n: publishes(replicas, runId, stepId) }).toEqual({ runId, n: 1 });
        expect(h.resolves.get(`${runId}/${stepId}`)).toHaveLength(1);
      }
      if (mode === 'real') {
        // Both replicas took part (each claims due rows with SKIP LOCKED).
        const by = replicas.map((r) => [...r.published.keys()].filter((k) => sent.some((s) => k === `resolve:${s.runId}:${s.stepId}`)).length);
        expect(by[0]! + by[1]!).toBe(30);
      }
    } finally {
      await second.stop();
    }
  });

  it('a decision racing the timeout: exactly one wins, the loser gets 409, and the step resolves once with the winner', async () => {
    const tally = { decision: 0, timeout: 0 };
    for (let i = 0; i < 12; i++) {
      const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS, timeoutMs: HOUR, onTimeout: i % 2 ? 'reject' : 'fail' });
      const a = await h.approvalOf(runId);
      // Make the timeout due now and decide at once: the timer (polling every 20 ms) and the decision contend for the row.
      await h.db.query('update approvals.approvals set timer_at = now() where id = $1', [a.id]);
      if (i % 3 === 0) await new Promise((r) => setImmediate(r));
      const res = await h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved' } }, { actor: 'alice' });
      const [r, ...more] = await h.resolved(runId, stepId);
      const final = (await h.call('approvals.get', { params: { id: a.id } })).body;
      if (res.status === 200) {
        tally.decision++;
        expect(final).toMatchObject({ status: 'approved', decidedBy: 'alice', decidedVia: 'api' });
        expect(r!.data).toMatchObject({ status: 'approved', decidedVia: 'api' });
      } else {
        tally.timeout++;
        expect(res).toMatchObject({ status: 409, body: { error: { code: 'approval_not_open' } } });
        expect(final.status).toBe(i % 2 ? 'denied' : 'cancelled');
        if (i % 2) expect(r!.data).toMatchObject({ status: 'denied', decidedVia: 'timeout' });
        else expect(r!.error).toMatch(/timed out: onTimeout is fail/);
      }
      await until(async () => (await h.db.query('select 1 from approvals.outbox limit 1')).length === 0, 15_000, 'the outbox to drain');
      expect(more).toHaveLength(0);
      expect(publishes([h.primary], runId, stepId)).toBe(1);
    }
    expect(tally.decision + tally.timeout).toBe(12);
    console.log(`decision vs timeout (${mode}): ${JSON.stringify(tally)}`);
  });

  // One in-process bus and PGlite cannot be cut apart from a stop: the crash is played on real infrastructure only.
  (mode === 'real' ? it : it.skip)('kill -9 between the decision commit and its publish: the run resumes exactly once, from the outbox', async () => {
    const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS });
    const a = await h.approvalOf(runId);
    // Only the doomed replica answers the API: it commits the decision, then dies before publishing.
    let held = false;
    const doomed = await h.replica({ holdResolve: () => (held = true) });
    await h.primary.stop();
    const call = h.call('approvals.decide', { params: { id: a.id }, body: { status: 'approved', args: { amount: 1 } } }, { actor: 'alice', via: 'console' });
    await until(() => held, 10_000, 'the decision committed and its publish reached');
    await doomed.crash();
    await expect(call).rejects.toThrow(); // the caller never got an answer
    expect(h.resolves.has(`${runId}/${stepId}`)).toBe(false);
    const [row] = await h.db.query<{ status: string }>('select status from approvals.approvals where id = $1', [a.id]);
    expect(row!.status).toBe('approved');
    // A restarted replica's relay publishes the committed decision.
    const restarted = await h.replica();
    const [r] = await h.resolved(runId, stepId);
    expect(r!.data).toEqual({ gated: true, approvalId: a.id, status: 'approved', args: { amount: 1 }, decidedBy: 'alice', decidedVia: 'console' });
    await until(async () => (await h.db.query('select 1 from approvals.outbox limit 1')).length === 0, 15_000, 'the outbox to drain');
    // A fresh ResolveStep of another run, published after: once it arrived, a duplicate would have too.
    const marker = await h.handoff({ tool: 'x', data: 1, minRisk: 'high', risk: 'low' }, { runId: uniqueName('marker') });
    await h.resolved(marker.runId, marker.stepId);
    expect(h.resolves.get(`${runId}/${stepId}`)).toHaveLength(1);
    expect(restarted.published.get(`resolve:${runId}:${stepId}`)).toBe(1);
    // The harness's primary is gone: let the restarted replica stand in for the rest of the file.
    h.primary = restarted;
  });

  it('a replica that arms a timer sleeps until it is due, not until its next poll', async () => {
    // The only replica left polls once a minute: the timer fires on time only if arming it set its sleep.
    await h.primary.stop();
    const slow = await h.replica({ pollMs: 60_000 });
    h.primary = slow;
    await new Promise((r) => setTimeout(r, 300)); // its first look is over: it sleeps for a minute
    const { runId, stepId } = await h.handoff({ tool: 'wire', data: ARGS, timeoutMs: 700, onTimeout: 'approve' });
    const armedAt = Date.now();
    await h.resolved(runId, stepId);
    expect(Date.now() - armedAt).toBeLessThan(10_000);
    expect(await h.approvalOf(runId)).toMatchObject({ status: 'approved', decidedVia: 'timeout' });
  });
});
