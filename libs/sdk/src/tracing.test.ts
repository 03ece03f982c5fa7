import { afterEach, describe, expect, it } from '@jest/globals';
import { trace, type Context, type Span, type SpanContext, type SpanOptions, type SpanStatus, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type { InvokeRequestBody } from '@dws/protocol';
import { executePass } from './execution.js';
import { loadOtel, startPassTrace } from './tracing.js';

/** What a span recorded: enough to check names, parents and statuses. */
interface Recorded {
  name: string;
  context: SpanContext;
  parent: SpanContext | undefined;
  attributes: Record<string, unknown>;
  status: SpanStatus | undefined;
  ended: boolean;
}

/** A minimal tracer provider on the OTel API (what a runner registers with its OTel SDK), recording spans in memory. */
function recordingProvider(): { provider: TracerProvider; spans: Recorded[] } {
  const spans: Recorded[] = [];
  let n = 0;
  const tracer: Tracer = {
    startSpan(name: string, options: SpanOptions = {}, ctx?: Context): Span {
      const parent = ctx && trace.getSpanContext(ctx);
      const rec: Recorded = {
        name,
        context: { traceId: parent?.traceId ?? 'f'.repeat(32), spanId: (++n).toString(16).padStart(16, '0'), traceFlags: 1 },
        parent,
        attributes: { ...options.attributes },
        status: undefined,
        ended: false,
      };
      spans.push(rec);
      const span: Span = {
        spanContext: () => rec.context,
        setAttribute: (k, v) => ((rec.attributes[k] = v), span),
        setAttributes: (a) => (Object.assign(rec.attributes, a), span),
        addEvent: () => span,
        addLink: () => span,
        addLinks: () => span,
        setStatus: (s) => ((rec.status = s), span),
        updateName: () => span,
        end: () => void (rec.ended = true),
        isRecording: () => true,
        recordException: () => {},
      };
      return span;
    },
    startActiveSpan: (() => {
      throw new Error('not used');
    }) as Tracer['startActiveSpan'],
  };
  return { provider: { getTracer: () => tracer }, spans };
}

const input = (traceparent?: string): InvokeRequestBody => ({
  event: { name: 'e', data: {} },
  steps: {},
  ctx: { runId: 'run_1', workflow: 'wf', attempt: 0, app: 'default', runner: '', ...(traceparent ? { traceparent } : {}) },
});
const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('runner spans', () => {
  afterEach(() => trace.disable());

  it('make nothing while no tracer provider is registered', async () => {
    await loadOtel();
    expect(startPassTrace(input(TP).ctx)).toBeUndefined();
  });

  it('continue ctx.traceparent: workflow.pass under the invoke span, each new step.run under it, failures marked', async () => {
    await loadOtel();
    const { provider, spans } = recordingProvider();
    trace.setGlobalTracerProvider(provider);
    const pt = startPassTrace(input(TP).ctx)!;
    expect(pt).toBeDefined();
    const result = await executePass(
      async ({ step }) => {
        await step.run('a', () => 1);
        await step.run('b', () => {
          throw new Error('boom');
        });
      },
      input(TP),
      { stepBudgetMs: 1000, trace: pt },
    );
    pt.end(result.status, 'error' in result ? result.error : undefined);
    expect(result.status).toBe(206);
    const [pass, a, b] = spans;
    expect(pass).toMatchObject({
      name: 'workflow.pass',
      parent: { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', isRemote: true },
      attributes: { 'dws.run.id': 'run_1', 'dws.workflow': 'wf', 'dws.reply.status': 206 },
      status: undefined,
      ended: true,
    });
    expect(a).toMatchObject({ name: 'step.run', parent: pass!.context, attributes: { 'dws.step.name': 'a' }, status: undefined, ended: true });
    expect(b).toMatchObject({ name: 'step.run', parent: pass!.context, attributes: { 'dws.step.name': 'b' }, status: { code: 2, message: 'boom' }, ended: true });
    expect(spans).toHaveLength(3);
  });

  it('mark a pass that failed the run', async () => {
    await loadOtel();
    const { provider, spans } = recordingProvider();
    trace.setGlobalTracerProvider(provider);
    const pt = startPassTrace(input().ctx)!;
    pt.end(400, new Error('no'));
    expect(spans[0]).toMatchObject({ name: 'workflow.pass', parent: undefined, attributes: { 'dws.reply.status': 400 }, status: { code: 2, message: 'no' } });
  });
});
