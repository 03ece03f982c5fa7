import type { StepError } from '@dws/protocol';

/** One memo entry as JSON text: `"<hashed id>":{"data":<raw json>}` or `{"error":{...}}`. */
export function memoEntry(id: string, entry: { dataJson?: string; error?: StepError; pending?: boolean }): string {
  if (entry.pending) return `"${id}":{"pending":true}`;
  if (entry.error) return `"${id}":{"error":${JSON.stringify(entry.error)}}`;
  return `"${id}":{"data":${entry.dataJson ?? 'null'}}`;
}

export interface InvokeContext {
  runId: string;
  workflow: string;
  attempt: number;
  app: string;
  runner: string;
  eventName: string;
  /** Raw JSON of the event data. */
  inputJson: string;
  /** Set on an onFailure run: the failed run's terminal error. */
  onFailureError?: StepError;
  /** Token a runner sends finished steps back under while the pass runs (checkpoints; see docs/architecture.md). */
  checkpoint?: string;
  /** Where to POST checkpoints straight to the replica driving the pass (an extension of SPEC's ctx; without it, the gateway). */
  checkpointUrl?: string;
  /** The same replica's checkpoint WebSocket (ws:// or wss://): one socket per runner process, no HTTP exchange per step. */
  checkpointSocket?: string;
}

/**
 * The POST /invoke body, assembled as text: memo entries are kept as JSON
 * fragments and joined, so a pass costs no re-parse or re-serialisation of
 * results already stored.
 */
export function invokeBody(ctx: InvokeContext, memo: Iterable<string>): string {
  return (
    `{"event":{"name":${JSON.stringify(ctx.eventName)},"data":${ctx.inputJson}},` +
    `"steps":{${[...memo].join(',')}},` +
    `"ctx":{"runId":${JSON.stringify(ctx.runId)},"workflow":${JSON.stringify(ctx.workflow)},"attempt":${ctx.attempt},` +
    `"app":${JSON.stringify(ctx.app)},"runner":${JSON.stringify(ctx.runner)}` +
    (ctx.onFailureError ? `,"onFailure":true,"error":${JSON.stringify(ctx.onFailureError)}` : '') +
    (ctx.checkpoint ? `,"checkpoint":${JSON.stringify(ctx.checkpoint)}` : '') +
    (ctx.checkpoint && ctx.checkpointUrl ? `,"checkpointUrl":${JSON.stringify(ctx.checkpointUrl)}` : '') +
    (ctx.checkpoint && ctx.checkpointSocket ? `,"checkpointSocket":${JSON.stringify(ctx.checkpointSocket)}` : '') +
    '}}'
  );
}
