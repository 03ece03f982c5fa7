import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startTs, type Proc } from '../src/processes.js';

/**
 * examples/quickstart as a new user runs it: `pnpm dev` in one terminal (or
 * the six services as processes), the example (`pnpm example`, i.e. tsx
 * src/main.ts) in another with the printed secret key, then events through
 * the public API, sent as soon as the example says it is connected.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the quickstart runs embedded only (fleet SKIPPED) !!!\n');

describe.each(modes)('examples/quickstart against %s', (mode) => {
  let dep: Deployment;
  let example: Proc;

  const finished = (runId: string) =>
    eventually(
      `run ${runId}`,
      async () => {
        const r = await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey });
        return runReached(r.body);
      },
      60_000,
    );
  const send = async (name: string, data: unknown) =>
    (await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name, data } })).body;

  beforeAll(async () => {
    dep = await startDeployment(mode);
    example = startTs('example', 'examples/quickstart/src/main.ts', { SERVICE_URL: `${dep.base}/v1`, SERVICE_API_KEY: dep.secretKey });
    await eventually('the example to connect', async () => (example.output().includes('shop runner connected') ? true : undefined), 60_000).catch(
      (err: Error) => {
        // What the example printed (its connect states and refusals) is the diagnosis.
        throw new Error(`${err.message}\nexample output:\n${example.output().slice(-4000)}`);
      },
    );
  }, 180_000);

  afterAll(async () => {
    await example?.kill();
    await dep?.stop();
  }, 60_000);

  it('runs all three workflows: an order (with the receipt it emits) and an onboarding woken by an event', async () => {
    const order = await send('shop/order.created', { orderId: 'o-1', email: 'ada@example.com', items: [{ sku: 'tea', qty: 2, price: 4.5 }] });
    const orderRun = await finished(order.runId);
    expect(orderRun.result).toMatchObject({ total: 9, payment: { paymentId: 'pay_o-1' }, reservation: { reserved: ['tea'] } });
    const logs = await api(dep.base, 'GET', `/v1/runs/${order.runId}/logs`, { key: dep.secretKey });
    expect(logs.body).toEqual([expect.objectContaining({ message: 'order paid', fields: expect.objectContaining({ cardToken: '[REDACTED]' }) })]);

    const receipt = await eventually('the receipt run the order emitted', async () => {
      const r = await api(dep.base, 'GET', '/v1/runs?app=shop', { key: dep.secretKey });
      return r.body?.find?.((x: { workflow: string }) => x.workflow === 'send-receipt');
    });
    expect((await finished(receipt.id)).result).toEqual({ to: 'ada@example.com', subject: 'Your order o-1: 9' });

    const signup = await send('shop/user.signed_up', { userId: 'u-1', email: 'ada@example.com' });
    await eventually('the onboarding to wait', async () => {
      const woke = await send('shop/user.verified', { userId: 'u-1' });
      return woke.woke === 1 ? true : undefined;
    });
    expect((await finished(signup.runId)).result).toEqual({ to: 'ada@example.com', template: 'welcome' });
  }, 120_000);

  it('places an order from code with src/order.ts (the SDK client): it prints each step as the run goes, then the result', async () => {
    const env = { SERVICE_URL: `${dep.base}/v1`, SERVICE_API_KEY: dep.secretKey };
    for (const [orderId, printed] of [
      ['o-client', 'succeeded: {'],
      ['o-client', 'order o-client was placed before'],
    ] as const) {
      const order = startTs('order', 'examples/quickstart/src/order.ts', env, [orderId]);
      // 'close': the process exited and its output was all read.
      const exit = await new Promise<number | null>((resolve) => order.child.once('close', resolve));
      const out = order.output();
      expect({ exit, printed: out.includes(printed) }).toEqual({ exit: 0, printed: true });
      if (printed.startsWith('succeeded')) {
        expect(out).toMatch(/step price succeeded[\s\S]*log info order paid .*"cardToken":"\[REDACTED\]"[\s\S]*run succeeded/);
        expect(out).toContain('"total":9');
      }
    }
  }, 120_000);
});
