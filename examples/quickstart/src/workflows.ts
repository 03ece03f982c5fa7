import { createRunner, NonRetriableError } from '@dws/sdk';

/**
 * One runner, three workflows of a small shop. Everything the service needs
 * comes from the environment: SERVICE_API_KEY (the secret key `pnpm dev`
 * prints), SERVICE_URL, SERVICE_APP.
 */
export const runner = createRunner({
  url: process.env.SERVICE_URL ?? 'http://127.0.0.1:8288/v1',
  app: process.env.SERVICE_APP ?? 'shop',
  runnerId: 'shop-1',
});

interface Order {
  orderId: string;
  email: string;
  items: { sku: string; qty: number; price: number }[];
}

/** 1. An order comes in: charge and reserve in parallel, then announce it. */
export const processOrder = runner.workflow<Order>(
  'process-order',
  { triggers: [{ event: 'shop/order.created' }], retry: { maxAttempts: 3 } },
  async ({ event, step, logger }) => {
    const total = await step.run('price', () => {
      if (event.data.items.length === 0) throw new NonRetriableError('an order needs at least one item');
      return event.data.items.reduce((sum, i) => sum + i.qty * i.price, 0);
    });
    // Parallel steps: both run in one pass and are reported together.
    const [payment, reservation] = await Promise.all([
      step.run('charge-card', () => ({ paymentId: `pay_${event.data.orderId}`, amount: total })),
      step.run('reserve-stock', () => ({ reserved: event.data.items.map((i) => i.sku) })),
    ]);
    logger.info('order paid', { orderId: event.data.orderId, amount: total, cardToken: 'tok_visa' }); // cardToken is redacted
    await step.emit('announce', { name: 'shop/order.confirmed', data: { orderId: event.data.orderId, email: event.data.email, total } });
    return { total, payment, reservation };
  },
);

/** 2. A confirmed order: wait a moment (durably), then send the receipt. */
export const sendReceipt = runner.workflow<{ orderId: string; email: string; total: number }>(
  'send-receipt',
  { triggers: [{ event: 'shop/order.confirmed' }] },
  async ({ event, step }) => {
    await step.sleep('cool-off', '2s');
    return step.run('email-receipt', () => ({ to: event.data.email, subject: `Your order ${event.data.orderId}: ${event.data.total}` }));
  },
);

/** 3. A new user: wait up to a day for them to verify their email, then welcome or nudge them. */
export const onboardUser = runner.workflow<{ userId: string; email: string }>(
  'onboard-user',
  { triggers: [{ event: 'shop/user.signed_up' }] },
  async ({ event, step }) => {
    const verified = await step.waitForEvent('verified', {
      event: 'shop/user.verified',
      timeout: '1d',
      if: `event.data.userId == "${event.data.userId}"`,
    });
    if (!verified) return step.run('nudge', () => ({ to: event.data.email, template: 'please-verify' }));
    return step.run('welcome', () => ({ to: event.data.email, template: 'welcome' }));
  },
);
