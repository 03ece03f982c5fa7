import { endSpan, headersOf, runContext, SpanKind, startRunRoot, trace, traceparentOf, tracer, type Context, type Span, type Tracer } from '@dws/telemetry';
import type { Decision } from '../domain/reply.js';
import type { HeldRun } from './held-run.js';

type Attributes = Record<string, string>;
type Link = { context: ReturnType<Span['spanContext']> };

/**
 * The spans of one pass (docs/tracing.md), made only while tracing is on:
 * `run.pass` under the root of the run's trace (its ids come from the run
 * id, so every pass on any replica joins it with nothing stored), and under
 * it `runner.invoke` (client: the call that reaches the runner, directly or
 * through the invoker; its context is what the runner continues), a
 * `pass.checkpoint` for each checkpoint stored meanwhile, then `pass.apply`
 * (deciding and writing the reply).
 */
export class PassTrace {
  private apply: Span | undefined;
  /** Runs the pass's commit started other than the decision's children: an onFailure run. */
  private readonly started: { runId: string; attributes: Attributes }[] = [];
  /** The W3C traceparent a runner or the invoker continues: the `runner.invoke` span's. */
  readonly traceparent: string;

  private constructor(
    private readonly runId: string,
    private readonly t: Tracer,
    private readonly pass: Span,
    private readonly ctx: Context,
    private readonly invoke: Span,
  ) {
    this.traceparent = traceparentOf(invoke);
  }

  /** The pass about to start, or undefined with tracing off (the engine then does nothing more). */
  static start(run: HeldRun): PassTrace | undefined {
    const t = tracer();
    if (!t) return undefined;
    const parent = runContext(run.id);
    const pass = t.startSpan(
      'run.pass',
      {
        attributes: {
          'dws.workspace.id': run.workspaceId,
          'dws.run.id': run.id,
          'dws.app': run.app,
          'dws.workflow': run.workflow,
          'dws.pass': run.pass,
          'dws.attempt': run.attempt,
        },
      },
      parent,
    );
    const ctx = trace.setSpan(parent, pass);
    const invoke = t.startSpan('runner.invoke', { kind: SpanKind.CLIENT, attributes: { 'dws.run.id': run.id } }, ctx);
    return new PassTrace(run.id, t, pass, ctx, invoke);
  }

  /** Bus headers carrying the `runner.invoke` context (the invoker's spans continue it). */
  get headers(): Record<string, string> {
    return headersOf(this.invoke);
  }

  /** Which way the pass went: `direct` (the scheduler POSTed a serve runner) or `invoker`. */
  via(path: 'direct' | 'invoker', runnerId?: string): void {
    this.invoke.setAttribute('dws.invoke.path', path);
    if (runnerId) this.invoke.setAttribute('dws.runner.id', runnerId);
  }

  /** The reply (or its failure) is back: `runner.invoke` ends, `pass.apply` begins. */
  replied(outcome: string): void {
    this.invoke.setAttribute('dws.invoke.outcome', outcome);
    this.invoke.end();
    this.apply = this.t.startSpan('pass.apply', {}, this.ctx);
  }

  /** A checkpoint of this pass (steps stored mid-pass): `pass.checkpoint` under `run.pass`, ended when `stored` settles. */
  async checkpoint(path: string, steps: number, stored: Promise<boolean>): Promise<boolean> {
    const span = this.t.startSpan('pass.checkpoint', { attributes: { 'dws.run.id': this.runId, 'dws.checkpoint.path': path, 'dws.checkpoint.steps': steps } }, this.ctx);
    let err: unknown;
    try {
      const ok = await stored;
      span.setAttribute('dws.checkpoint.stored', ok);
      return ok;
    } catch (e) {
      err = e;
      throw e;
    } finally {
      endSpan(span, err);
    }
  }

  /** The pass's commit started the onFailure run of the run it failed. */
  onFailureRun(runId: string, workflow: string): void {
    this.started.push({ runId, attributes: { 'dws.workflow': workflow, 'dws.trigger': 'onFailure', 'dws.failed.run.id': this.runId } });
  }

  /**
   * Ends `pass.apply` and `run.pass` once `applied` settles, with what the
   * reply decided. A child run the pass started (step.invoke) and an
   * onFailure run get the root of their own trace here, `run.start`, linked
   * to this pass: the scheduler creates them, so nobody else would.
   */
  static async settle(pt: PassTrace | undefined, decision: Decision, applied: Promise<boolean>): Promise<boolean> {
    if (!pt) return applied;
    let err: unknown;
    try {
      return await applied;
    } catch (e) {
      err = e;
      throw e;
    } finally {
      pt.pass.setAttribute('dws.decision', decision.type);
      if (pt.apply) endSpan(pt.apply, err);
      endSpan(pt.pass, err);
      if (err === undefined) pt.childRoots(decision);
    }
  }

  private childRoots(decision: Decision): void {
    const links = [{ context: this.pass.spanContext() }];
    for (const s of decision.steps) {
      if (!s.child) continue;
      rootOf(this.t, s.child.runId, { 'dws.workflow': s.child.workflow, 'dws.trigger': 'invoke', 'dws.parent.run.id': this.runId }, links);
    }
    for (const r of this.started) rootOf(this.t, r.runId, r.attributes, links);
  }
}

/**
 * The root of a run's trace for a run the scheduler itself creates (a child,
 * an onFailure run, a replay): ingest roots the runs an event or a schedule
 * starts, and without this the passes of these would hang under a root
 * nobody exports; `linkedRun`: a run whose root it links to (a replay's
 * source). A no-op with tracing off.
 */
export function traceRunStart(runId: string, attributes: Attributes, linkedRun?: string): void {
  const t = tracer();
  if (!t) return;
  const linked = linkedRun ? trace.getSpanContext(runContext(linkedRun)) : undefined;
  rootOf(t, runId, attributes, linked && [{ context: linked }]);
}

function rootOf(t: Tracer, runId: string, attributes: Attributes, links?: Link[]): void {
  startRunRoot(t, 'run.start', runId, { kind: SpanKind.PRODUCER, ...(links && { links }), attributes: { 'dws.run.id': runId, ...attributes } }).end();
}
