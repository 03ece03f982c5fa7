import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  contextOf,
  formatTraceparent,
  parseTraceparent,
  runContext,
  runTraceIds,
  SpanKind,
  startRunRoot,
  startTracing,
  trace,
  tracer,
  tracesEndpoint,
} from '../src/index.js';
import { startOtlpReceiver, type OtlpReceiver } from '../src/testing.js';

describe('tracing', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(() => receiver.close());

  it('with OTEL_EXPORTER_OTLP_ENDPOINT unset, registers nothing and exports nothing', async () => {
    for (const env of [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' }]) {
      const t = await startTracing({ serviceName: 'off', env });
      expect(t.enabled).toBe(false);
      expect(tracer()).toBeUndefined();
      // The global API is still its no-op self: a span made through it records nothing.
      const span = trace.getTracer('any').startSpan('nothing');
      expect(span.isRecording()).toBe(false);
      span.end();
      await t.shutdown();
    }
    expect(receiver.requests).toBe(0);
    expect(receiver.spans).toEqual([]);
  });

  it('with OTEL_EXPORTER_OTLP_ENDPOINT set, exports over OTLP/HTTP; a run root takes the run ids and passes hang under it', async () => {
    const t = await startTracing({ serviceName: 'ingest', env: { OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` } });
    expect(t).toMatchObject({ enabled: true, endpoint: `${receiver.url}/v1/traces` });
    const tr = tracer()!;
    expect(tr).toBeDefined();
    const root = startRunRoot(tr, 'event.ingest', 'run_one', { kind: SpanKind.PRODUCER, attributes: { 'dws.run.id': 'run_one' } });
    root.end();
    const pass = tr.startSpan('run.pass', {}, runContext('run_one'));
    const child = tr.startSpan('runner.invoke', { kind: SpanKind.CLIENT }, trace.setSpan(runContext('run_one'), pass));
    child.end();
    pass.end();
    // Another span right after a root: ids are random again.
    const other = tr.startSpan('other');
    other.end();
    // Code on the global API exports through it as well (the runner SDK does).
    expect(trace.getTracer('sdk').startSpan('x').isRecording()).toBe(true);
    await t.shutdown();
    expect(tracer()).toBeUndefined();
    expect(trace.getTracer('any').startSpan('after').isRecording()).toBe(false);

    const ids = runTraceIds('run_one');
    const byName = new Map(receiver.spans.map((s) => [s.name, s]));
    expect(byName.get('event.ingest')).toMatchObject({
      service: 'ingest', traceId: ids.traceId, spanId: ids.rootSpanId, parentSpanId: '', kind: 4, attributes: { 'dws.run.id': 'run_one' },
    });
    expect(byName.get('run.pass')).toMatchObject({ traceId: ids.traceId, parentSpanId: ids.rootSpanId });
    expect(byName.get('runner.invoke')).toMatchObject({ traceId: ids.traceId, parentSpanId: byName.get('run.pass')!.spanId, kind: 3 });
    expect(byName.get('other')!.traceId).not.toBe(ids.traceId);
    expect(byName.get('other')!.spanId).not.toBe(ids.rootSpanId);
  });

  it('derives a run trace from the run id alone', () => {
    const a = runTraceIds('run_a');
    expect(a).toEqual(runTraceIds('run_a'));
    expect(a.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(a.rootSpanId).toMatch(/^[0-9a-f]{16}$/);
    expect(runTraceIds('run_b').traceId).not.toBe(a.traceId);
  });

  it('reads and writes W3C traceparent values, refusing malformed ones', () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const sc = parseTraceparent(tp)!;
    expect(sc).toEqual({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true });
    expect(formatTraceparent(sc)).toBe(tp);
    expect(trace.getSpanContext(contextOf(tp)!)).toEqual(sc);
    for (const bad of [undefined, 42, '', 'nope', '00-00000000000000000000000000000000-b7ad6b7169203331-01', '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it('takes the traces endpoint from the standard variables', () => {
    expect(tracesEndpoint({})).toBeUndefined();
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe('http://c:4318/v1/traces');
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t/x' })).toBe('http://t/x');
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });
});
