/** The fields of an event posted to POST /events (SPEC): any other is refused, never ignored. */
export const EVENT_FIELDS = ['name', 'app', 'data', 'dedupeId', 'runner', 'targetApp', 'session', 'delay', 'tags'] as const;

const KNOWN = new Set<string>(EVENT_FIELDS);

/** What a field another service's events carry means here. */
const POINTERS: Record<string, string> = {
  id: 'for an idempotent send (Inngest\'s event id) use dedupeId: a repeat within 24 h is dropped',
  ts: 'the service stamps receivedAt when the event arrives; to take it in later (Inngest\'s ts in the future) use delay',
};

/**
 * The sentence refusing an event's unknown fields, or undefined when it has
 * none. Ignoring them would be silent: an `id` sent for idempotency would
 * start a second run.
 */
export function unknownEventFields(keys: readonly string[]): string | undefined {
  const unknown = keys.filter((k) => !KNOWN.has(k));
  if (unknown.length === 0) return undefined;
  const pointers = unknown.filter((k) => POINTERS[k]).map((k) => `${k}: ${POINTERS[k]}`);
  return [
    `Unknown event field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}`,
    ...pointers,
    `an event takes ${EVENT_FIELDS.join(', ')}`,
  ].join('; ');
}

/**
 * The headers of an inbound webhook post (POST /v1/webhooks/{slug}) that
 * the gateway passes on besides the signatures, that ingest records with the
 * post and that a receiver's transform reads: what tells posts apart, never
 * a credential.
 */
export const INBOUND_HEADERS = [
  'content-type',
  'user-agent',
  'x-service-delivery-id',
  'x-github-event',
  'x-github-delivery',
  'x-gitlab-event',
  'x-shopify-topic',
  'x-event-key',
] as const;
