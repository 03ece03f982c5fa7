import type { RunFinished, StepFailed } from '@dws/proto';

const dec = new TextDecoder();
const json = (b: Uint8Array): unknown => (b.length ? (JSON.parse(dec.decode(b)) as unknown) : undefined);
const iso = (ms: bigint): string => new Date(Number(ms)).toISOString();

/**
 * Body of a lifecycle delivery (documented in the README): an envelope with
 * the delivery id and kind, and `data` per kind. The delivery id is in the
 * body as well as in X-Service-Delivery-Id so a partner can dedupe on either.
 */
export function runFinishedPayload(deliveryId: string, f: RunFinished): { kind: string; body: Record<string, unknown> } {
  const kind = `run.${f.status}`;
  const data: Record<string, unknown> = { runId: f.runId, workflow: f.workflow, app: f.app, tags: f.tags, status: f.status, finishedAt: iso(f.atMs) };
  if (f.status === 'succeeded') data.result = json(f.result) ?? null;
  else data.error = json(f.error) ?? { message: f.status };
  return { kind, body: { id: deliveryId, kind, createdAt: new Date().toISOString(), data } };
}

export function stepFailedPayload(deliveryId: string, f: StepFailed): Record<string, unknown> {
  return {
    id: deliveryId,
    kind: 'step.failed',
    createdAt: new Date().toISOString(),
    data: { runId: f.runId, workflow: f.workflow, app: f.app, tags: f.tags, stepId: f.stepId, stepName: f.stepName, attempts: f.attempts, error: json(f.error) ?? null, failedAt: iso(f.atMs) },
  };
}
