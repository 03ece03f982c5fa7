import { createClient } from '@dws/sdk';

/**
 * Place an order and watch its run, with the SDK's client of the REST API
 * (SERVICE_URL and SERVICE_API_KEY, as the runner reads them):
 *
 *   SERVICE_API_KEY=sk_dev_quickstart pnpm --filter @dws/example-quickstart order o-2
 */
const client = createClient({ url: process.env.SERVICE_URL ?? 'http://127.0.0.1:8288/v1' });
const orderId = process.argv[2] ?? `o-${Date.now()}`;

const sent = await client.send({
  name: 'shop/order.created',
  data: { orderId, email: 'ada@example.com', items: [{ sku: 'tea', qty: 2, price: 4.5 }] },
  dedupeId: orderId, // the same order sent twice starts one run (and makes the send safe to retry)
});
if (!sent.runId) {
  process.stdout.write(sent.deduped ? `order ${orderId} was placed before\n` : `no workflow took shop/order.created: is the runner connected?\n`);
  process.exit(sent.deduped ? 0 : 1);
}
process.stdout.write(`order ${orderId}: run ${sent.runId}\n`);
for await (const frame of client.runs.stream(sent.runId)) {
  if (frame.kind === 'step_status') process.stdout.write(`  step ${frame.name} ${frame.status}\n`);
  else if (frame.kind === 'log') process.stdout.write(`  log ${frame.level} ${frame.message} ${JSON.stringify(frame.fields ?? {})}\n`);
  else process.stdout.write(`  run ${frame.status}\n`);
}
const run = await client.runs.get(sent.runId);
process.stdout.write(`${run.status}: ${JSON.stringify(run.status === 'succeeded' ? run.result : run.error)}\n`);
process.exit(run.status === 'succeeded' ? 0 : 1);
