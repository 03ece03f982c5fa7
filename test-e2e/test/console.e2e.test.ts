import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Gates } from '@dws/testing';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { ROOT } from '../src/processes.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * The web console in a real browser (Debian's headless Chromium, driven by
 * playwright-core) against the six-process fleet: a workspace made with the
 * admin API, a runner on the SDK, setup through the public API only, and
 * every behaviour under test done by clicking through the console as a
 * person would: sign in, watch a run go from queued to succeeded live,
 * cancel a run, retry one from a step, approve with edited arguments,
 * redeliver a webhook delivery, send a test event and follow it to its run,
 * filter the runs by their tags.
 * Each page is saved as a screenshot under test-e2e/screenshots/ (git-ignored).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const ON_CI = process.env.CI === 'true';
if (!HAVE_CHROMIUM && !ON_CI) {
  console.warn(`\n!!! ${CHROMIUM} missing: the console browser tests are SKIPPED (apt-get install chromium) !!!\n`);
}
// On CI a missing browser fails the suite (beforeAll throws) instead of skipping it.
const suite = HAVE_CHROMIUM || ON_CI ? describe : describe.skip;

const mode: Mode = realInfra() ? 'fleet' : 'embedded';
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: the console browser tests run on `pnpm dev` (embedded), not the fleet !!!\n');

const ADMIN = `admin-${randomBytes(8).toString('hex')}`;
const APP = 'shop';
const PERSON = 'Ada Lovelace';
const SHOTS = path.join(ROOT, 'test-e2e', 'screenshots');
/** Long enough for a pass through the fleet on a loaded 2-core machine; every wait below ends as soon as its condition holds. */
const UI_WAIT = 30_000;

interface Workspace {
  id: string;
  secretKey: string;
  publicKey: string;
  consoleKey: string;
  signingKey: string;
}

interface Received {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** A partner's webhook endpoint on 127.0.0.1: records every POST and answers 200. */
async function startReceiver(): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown> });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hooks/dws`,
    got,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

suite(`web console in Chromium on ${mode}`, () => {
  let dep: Deployment;
  let ws: Workspace;
  let runner: TestRunner;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const gates = new Gates();
  const invoices = { renders: 0, emails: 0, failEmail: true };
  const refunds: { orderId: string; amount: number }[] = [];
  const consoleErrors: string[] = [];

  const url = (p: string) => `${dep.base}${p}`;
  // Animations are stopped for the picture (the fresh-row flash, the live pulse), so it shows the resting page.
  const shot = (name: string, p: Page = page) => p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true, animations: 'disabled' });
  const send = async (name: string, data: unknown, tags?: string[]): Promise<{ id: string; runId: string }> => {
    const res = await api(dep.base, 'POST', '/v1/events', { key: ws.secretKey, body: { name, data, tags } });
    expect(res.status).toBe(202);
    expect(res.body.runId).toEqual(expect.stringMatching(/^run_/));
    return res.body;
  };
  const runOf = async (id: string) => (await api(dep.base, 'GET', `/v1/runs/${id}`, { key: ws.publicKey })).body;
  /** Marks the page; `sameDocument()` is false once anything reloaded it, so "it updated live" is checked, not assumed. */
  const markDocument = () => page.evaluate(() => void ((globalThis as { __dwsMark?: boolean }).__dwsMark = true));
  const sameDocument = () => page.evaluate(() => (globalThis as { __dwsMark?: boolean }).__dwsMark === true);
  /**
   * Opens a console path in `p`, signing in with the console key first if the
   * tab has no session yet (the sign-in test covers the form itself; this
   * keeps one failure there from failing every later test).
   */
  const open = async (pathname: string, p: Page = page) => {
    await p.goto(url(pathname));
    const form = p.getByRole('heading', { name: 'Sign in to your workspace' });
    const shell = p.getByRole('navigation', { name: 'Main' });
    await form.or(shell).first().waitFor();
    if (await form.isVisible()) {
      await p.getByLabel('API key').fill(ws.consoleKey);
      await p.getByLabel(/Your name/).fill(PERSON);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await shell.waitFor();
    }
  };
  /** Waits until the run page's status badge reads `status`. */
  const runIs = (status: string, p: Page = page) => p.locator(`[data-testid="run-status"][data-status="${status}"]`).waitFor();

  beforeAll(async () => {
    if (!HAVE_CHROMIUM) {
      throw new Error(`Chromium is not installed at ${CHROMIUM}: the console browser tests need it (apt-get install chromium; .ci/run installs it).`);
    }
    mkdirSync(SHOTS, { recursive: true });
    receiver = await startReceiver();
    dep = await startDeployment(mode, { env: { SERVICE_ADMIN_TOKEN: ADMIN, SERVICE_WEBHOOK_ALLOW_PRIVATE: 'on' } });
    const made = await api(dep.base, 'POST', '/v1/admin/workspaces', { key: ADMIN, body: { name: 'acme' } });
    expect(made.status).toBe(201);
    ws = made.body as Workspace;
    expect(ws.consoleKey).toMatch(/^ck_/);

    // The runner of the new workspace: its own secret and signing keys.
    runner = await startRunner(
      { ...dep, secretKey: ws.secretKey, signingKey: ws.signingKey },
      (r) => {
        r.workflow<{ orderId: string; items: number }>(
          'fulfil-order',
          { triggers: [{ event: 'order.placed' }], concurrency: { limit: 1 } },
          async ({ event, step, logger }) => {
            const reserved = await step.run('reserve-stock', () => ({ orderId: event.data.orderId, items: event.data.items }));
            // Held until the test opens it: the run is running (its first step stored) while the browser looks.
            const charged = await step.run('charge-card', async () => {
              await gates.wait(event.data.orderId);
              return { charged: true, items: reserved.items };
            });
            logger.info('order fulfilled', { orderId: event.data.orderId });
            return { orderId: event.data.orderId, charged: charged.charged };
          },
        );
        r.workflow<{ day: string }>(
          'nightly-report',
          { triggers: [{ event: 'report.requested' }], concurrency: [{ limit: 5 }, { limit: 1, key: 'event.data.day' }] },
          async ({ event, step }) => {
            const rows = await step.run('collect', () => ({ day: event.data.day, rows: 1280 }));
            await step.sleep('cool-down', '1h');
            return step.run('publish', () => ({ published: rows.rows }));
          },
        );
        r.workflow('quick-quote', { triggers: [{ event: 'quote.requested' }], timeouts: { finish: '1s' }, singleton: { mode: 'queue' } }, async ({ step }) => {
          await step.sleep('wait-for-pricing', '1h');
          return 'late';
        });
        r.workflow<{ invoice: string }>('send-invoice', { triggers: [{ event: 'invoice.created' }] }, async ({ event, step }) => {
          const pdf = await step.run('render-pdf', () => {
            invoices.renders++;
            return { invoice: event.data.invoice, pages: 2 };
          });
          const mail = await step.run('email-customer', () => {
            invoices.emails++;
            if (invoices.failEmail) throw new Error('SMTP 451: mailbox temporarily unavailable');
            return { sent: true, pages: pdf.pages };
          });
          return { invoice: pdf.invoice, ...mail };
        });
        r.workflow<{ orderId: string; amount: number }>(
          'refund-agent',
          { triggers: [{ event: 'support.refund_requested' }] },
          async ({ event, step }) => {
            const d = await step.approval<{ orderId: string; amount: number }>('refund-gate', {
              tool: 'issue_refund',
              args: event.data,
              risk: 'high',
              minRisk: 'high',
              summary: `Refund $${event.data.amount} on order ${event.data.orderId}`,
              policy: 'Refunds over $100 need a person’s sign-off.',
              context: 'Customer reports the parcel arrived damaged; photos attached to the ticket.',
            });
            const done = d.status === 'approved' ? await step.run('refund', () => (refunds.push(d.args), { refunded: d.args.amount })) : null;
            return { decision: d.status, decidedBy: d.decidedBy, decidedVia: d.decidedVia, done };
          },
        );
        r.workflow<{ name: string }>('greet', { triggers: [{ event: 'user.signed_up' }] }, async ({ event, step }) => {
          const name = await step.run('load', () => event.data.name);
          return { text: await step.run('compose', () => `Hello, ${name}!`) };
        });
      },
      { app: APP },
    );
    const endpoint = await api(dep.base, 'POST', '/v1/webhook-endpoints', {
      key: ws.secretKey,
      body: { name: 'Billing partner', url: receiver.url, eventKinds: ['run.succeeded'] },
    });
    expect(endpoint.status).toBe(201);
    const receiverMade = await api(dep.base, 'POST', '/v1/webhook-receivers', {
      key: ws.secretKey,
      body: { name: 'Stripe payments', eventName: 'payment.received', app: APP },
    });
    expect(receiverMade.status).toBe(201);

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    context = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: 'light', locale: 'en-US', timezoneId: 'UTC' });
    context.setDefaultTimeout(UI_WAIT);
    page = await context.newPage();
    page.on('pageerror', (err) => consoleErrors.push(String(err)));
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
  }, 180_000);

  afterAll(async () => {
    gates.openAll();
    await browser?.close();
    await runner?.close();
    await dep?.stop();
    await receiver?.close();
  }, 60_000);

  it('signs in with a console key and a name; a bad key and a nameless console key are refused', async () => {
    await page.goto(url('/'));
    await page.getByRole('heading', { name: 'Sign in to your workspace' }).waitFor();
    await shot('01-sign-in');

    await page.getByLabel('API key').fill('ck_not_a_key');
    await page.getByLabel(/Your name/).fill(PERSON);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'This key was not accepted' }).waitFor();
    await shot('02-sign-in-refused');

    await page.getByLabel('API key').fill(ws.consoleKey);
    await page.getByLabel(/Your name/).fill('');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'enter your name' }).waitFor();

    await page.getByLabel(/Your name/).fill(PERSON);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/runs');
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.getByText(PERSON).waitFor();
    await nav.getByText('console key').waitFor();
    await page.getByText('No runs yet').waitFor();
    await shot('03-runs-empty');

    // A public key reads but may not write: the console says so and hides write actions.
    const readOnly = await context.browser()!.newContext({ viewport: { width: 1440, height: 900 } });
    try {
      const p = await readOnly.newPage();
      await p.goto(url('/events'));
      await p.getByLabel('API key').fill(ws.publicKey);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByRole('heading', { name: 'Events', level: 1 }).waitFor();
      await p.getByText('read-only').waitFor();
      expect(await p.getByRole('button', { name: 'Send test event' }).count()).toBe(0);
    } finally {
      await readOnly.close();
    }
  }, 60_000);

  it('shows a run go from queued to running to succeeded live, without a reload', async () => {
    await open('/runs');
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await page.getByText('Live', { exact: true }).waitFor();
    await markDocument();

    // The first order holds the workflow's only concurrency slot; the second one queues behind it.
    const first = await send('order.placed', { orderId: 'ord-1001', items: 3 });
    const firstRow = page.locator(`tr[data-run="${first.runId}"]`);
    // The new run appears on the list by itself, and reads running once its first step is stored.
    await firstRow.locator('[data-status="running"]').waitFor();
    const second = await send('order.placed', { orderId: 'ord-1002', items: 1 });
    const secondRow = page.locator(`tr[data-run="${second.runId}"]`);
    await secondRow.locator('[data-status="queued"]').waitFor();
    await shot('04-runs-live');
    expect(await sameDocument()).toBe(true);

    // Open the queued run in the console: it says why it is not moving.
    await secondRow.getByRole('link', { name: second.runId }).click();
    await page.waitForURL(`**/runs/${second.runId}`);
    await runIs('queued');
    await page.locator('[data-waiting="concurrency"]').getByText('Queued behind a concurrency limit').waitFor();
    await page.getByText('Live', { exact: true }).waitFor();
    await shot('05-run-queued');

    // The first order finishes and frees the slot: the second one starts, its first step done, the second in flight.
    gates.open('ord-1001');
    await runIs('running');
    await page.locator('[data-step="reserve-stock"] [data-status="succeeded"]').waitFor();
    await page.locator('[data-waiting="running"]').waitFor();
    await shot('06-run-running');
    gates.open('ord-1002');
    await runIs('succeeded');
    await page.locator('[data-step="charge-card"] [data-status="succeeded"]').waitFor();
    await page.locator('[data-step="reserve-stock"] [data-status="succeeded"]').waitFor();
    expect(await sameDocument()).toBe(true);
    await page.getByRole('tab', { name: /Logs/ }).click();
    await page.getByRole('log').getByText('order fulfilled').waitFor();
    await page.getByRole('tab', { name: /Timeline/ }).click();
    await page.locator('[data-step="charge-card"] button').click();
    await page.locator('[data-step="charge-card"]').getByText('"charged"').waitFor();
    await shot('07-run-succeeded');

    // Back on the list (in-app, still no reload) both orders read succeeded.
    await page.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'Runs' }).click();
    await firstRow.locator('[data-status="succeeded"]').waitFor();
    await secondRow.locator('[data-status="succeeded"]').waitFor();
    expect(await sameDocument()).toBe(true);
    expect((await runOf(second.runId)).status).toBe('succeeded');
    await shot('08-runs');
  }, 120_000);

  it('cancels a sleeping run after a confirmation, and audits who did it', async () => {
    const { runId } = await send('report.requested', { day: '2026-11-24' });
    await eventually('the report run to sleep', async () => {
      const r = runReached(await runOf(runId), ['queued', 'running', 'waiting']);
      return r?.waitingFor?.kind === 'sleep' ? r : undefined;
    });
    await open(`/runs/${runId}`);
    await page.locator('[data-waiting="sleep"]').getByText('Sleeping until').waitFor();
    await page.locator('[data-step="cool-down"] [data-status="sleeping"]').waitFor();
    await shot('09-run-sleeping');

    await page.getByRole('button', { name: 'Cancel run' }).click();
    const dialog = page.getByRole('dialog', { name: 'Cancel this run?' });
    await dialog.waitFor();
    await shot('10-run-cancel-confirm');
    await dialog.getByRole('button', { name: 'Cancel run' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await runIs('cancelled');
    expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);
    await page.getByTestId('cancelled').getByText(PERSON).waitFor();
    await page.getByRole('tab', { name: /Audit/ }).click();
    await page.getByRole('tabpanel').getByRole('row').filter({ hasText: 'cancel' }).filter({ hasText: PERSON }).waitFor();
    await shot('11-run-cancelled');

    const run = await runOf(runId);
    expect(run.status).toBe('cancelled');
  }, 90_000);

  it('says why a run was cancelled by its timeout, where the audit names only the system', async () => {
    const { runId } = await send('quote.requested', {});
    await eventually('the quote run to time out', async () => runReached(await runOf(runId), ['cancelled']));
    await open(`/runs/${runId}`);
    await page.getByTestId('cancelled').getByText('Timed out: the run did not finish within 1 s (timeouts.finish).').waitFor();
    await page.getByRole('tab', { name: /Audit/ }).click();
    await page.getByRole('tabpanel').getByRole('row').filter({ hasText: 'system:timeout' }).waitFor();
  }, 60_000);

  it('bulk-cancels the sleeping runs a CEL condition selects, and each says why', async () => {
    const keep = await send('report.requested', { day: '2026-12-01' });
    const drop = await send('report.requested', { day: '2026-12-02' });
    for (const { runId } of [keep, drop]) await eventually('the report run to sleep', async () => runReached(await runOf(runId), ['waiting']));
    // The list narrowed to the workflow (its exact name): the dialog starts from that filter.
    await open('/runs?workflow=nightly-report');
    await page.getByRole('row').filter({ hasText: keep.runId }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: 'fulfil-order' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Bulk cancel…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Bulk cancel' });
    expect(await dialog.getByLabel('Workflow').inputValue()).toBe('nightly-report');
    await dialog.getByLabel('Condition (CEL)').fill("event.data.day == '2026-12-02'");
    await shot('33-runs-bulk-cancel');
    await dialog.getByRole('button', { name: 'Cancel matching runs' }).click();
    const done = page.getByRole('dialog', { name: 'Bulk cancel done' });
    await done.getByText('Cancelled', { exact: true }).waitFor();
    expect(await done.locator('.kv').innerText()).toMatch(/Matched\s+1\s+Cancelled\s+1/);
    expect((await runOf(drop.runId)).status).toBe('cancelled');
    expect((await runOf(keep.runId)).status).toBe('waiting');

    await open(`/runs/${drop.runId}`);
    await page.getByTestId('cancelled').getByText(`Cancelled by ${PERSON} in a bulk cancel.`).waitFor();
    await api(dep.base, 'POST', `/v1/runs/${keep.runId}/cancel`, { key: ws.secretKey });
  }, 60_000);

  it('retries a failed run from its failed step: the earlier step is not run again', async () => {
    const { runId } = await send('invoice.created', { invoice: 'INV-2042' });
    await eventually('the invoice run to fail', async () => runReached(await runOf(runId), 'failed'), 60_000);
    expect([invoices.renders, invoices.emails]).toEqual([1, 1]);

    await open(`/runs/${runId}`);
    await runIs('failed');
    await page.getByRole('alert').getByText('SMTP 451: mailbox temporarily unavailable').first().waitFor();
    await shot('12-run-failed');

    invoices.failEmail = false;
    await page.getByRole('button', { name: 'Retry from step…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Retry from a step' });
    const select = dialog.getByLabel('Step');
    // The first failed step is offered by default.
    expect(await select.inputValue()).toBe('email-customer');
    await shot('13-run-retry-dialog');
    await dialog.getByRole('button', { name: 'Retry from this step' }).click();

    // The console opens the new run, which names the run it retries.
    await page.waitForURL((u) => /^\/runs\/run_/.test(u.pathname) && !u.pathname.endsWith(runId));
    const newId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await page.locator('.meta').getByRole('link', { name: runId }).waitFor();
    await runIs('succeeded');
    await page.locator('[data-step="email-customer"] [data-status="succeeded"]').waitFor();
    await page.locator('[data-step="render-pdf"] [data-status="succeeded"]').waitFor();
    await shot('14-run-retried');

    const retried = await runOf(newId);
    expect(retried).toMatchObject({ status: 'succeeded', replayOf: runId, result: { invoice: 'INV-2042', sent: true, pages: 2 } });
    // render-pdf came from the memo: it ran once in all, the email twice.
    expect([invoices.renders, invoices.emails]).toEqual([1, 2]);
  }, 120_000);

  it('approves a parked tool call with edited arguments; the run carries them out and records the person', async () => {
    const { runId } = await send('support.refund_requested', { orderId: 'ord-7731', amount: 180 });
    await eventually('the refund run to park on its approval', async () => {
      const r = runReached(await runOf(runId), ['queued', 'running', 'waiting']);
      return r?.needsAttention === true ? r : undefined;
    });

    await open(`/runs/${runId}`);
    await runIs('needs_attention');
    await page.locator('[data-waiting="approval"]').getByRole('link', { name: /Open the approval/ }).click();
    await page.waitForURL(`**/approvals?runId=${runId}`);
    const card = page.getByRole('article', { name: 'Approval for issue_refund' });
    await card.getByText('Refund $180 on order ord-7731').waitFor();
    await page.getByRole('navigation', { name: 'Main' }).getByLabel('1 open').waitFor();
    await shot('15-approvals-open');

    await card.getByRole('button', { name: 'Edit & approve' }).click();
    const dialog = page.getByRole('dialog', { name: 'Approve issue_refund with edited arguments' });
    const args = dialog.getByLabel('Arguments');
    // Not JSON: the console says why and will not send it.
    await args.fill('{ "orderId": "ord-7731", "amount": ');
    await dialog.getByText('Not valid JSON').waitFor();
    expect(await dialog.getByRole('button', { name: 'Approve', exact: true }).isDisabled()).toBe(true);
    await args.fill(JSON.stringify({ orderId: 'ord-7731', amount: 40 }, null, 2));
    await dialog.getByText('Valid JSON').waitFor();
    // The dialog spells out the edit before it is approved.
    await dialog.getByTestId('arg-changes').getByText('amount').waitFor();
    expect(await dialog.getByTestId('arg-changes').innerText()).toContain('180 → 40');
    await dialog.getByLabel(/Response/).fill('Partial refund: the customer keeps the item.');
    await shot('16-approval-edit');
    await dialog.getByRole('button', { name: 'Approve', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });

    await page.getByText('Inbox zero').waitFor();
    // The nav's open-approvals badge follows the decision at once.
    await page.getByRole('navigation', { name: 'Main' }).getByLabel('1 open').waitFor({ state: 'detached' });
    const decided = page.getByRole('row').filter({ hasText: 'issue_refund' });
    await decided.getByText(PERSON).waitFor();
    await decided.getByText('console', { exact: true }).waitFor();
    await decided.getByText('"amount":40').waitFor();
    await shot('17-approvals-decided');

    const run = await eventually('the refund run to succeed', async () => runReached(await runOf(runId)), 60_000);
    expect(run.result).toEqual({ decision: 'approved', decidedBy: PERSON, decidedVia: 'console', done: { refunded: 40 } });
    expect(refunds).toEqual([{ orderId: 'ord-7731', amount: 40 }]);
    const approvals = await api(dep.base, 'GET', `/v1/approvals?runId=${runId}`, { key: ws.publicKey });
    expect(approvals.body[0]).toMatchObject({
      status: 'approved',
      args: { orderId: 'ord-7731', amount: 180 },
      editedArgs: { orderId: 'ord-7731', amount: 40 },
      decidedBy: PERSON,
      decidedVia: 'console',
    });

    await decided.getByRole('link', { name: runId }).click();
    await runIs('succeeded');
    await page.locator('[data-step="refund"] [data-status="succeeded"]').waitFor();
  }, 120_000);

  it('redelivers a webhook delivery: the partner gets it again, and a second attempt is logged', async () => {
    // The orders that succeeded above were delivered to the partner as run.succeeded.
    const delivery = await eventually('a succeeded run.succeeded delivery', async () => {
      const r = await api(dep.base, 'GET', '/v1/webhook-deliveries?status=succeeded&limit=200', { key: ws.publicKey });
      return (r.body as { id: string; sourceRunId?: string; attemptCount: number }[]).find((d) => d.attemptCount === 1);
    }, 60_000);
    const before = receiver.got.filter((g) => g.headers['x-service-delivery-id'] === delivery.id).length;
    expect(before).toBe(1);

    await open('/webhooks');
    const endpointRow = page.getByRole('row').filter({ hasText: 'Billing partner' });
    await endpointRow.getByText('run.succeeded').waitFor();
    await shot('18-webhooks-endpoints');

    await page.getByRole('tab', { name: 'Deliveries' }).click();
    const row = page.locator(`tr[data-delivery="${delivery.id}"]`);
    await row.locator('[data-status="succeeded"]').waitFor();
    await shot('19-webhooks-deliveries');
    await row.getByRole('button', { name: receiver.url }).click();
    const detail = page.getByRole('dialog', { name: 'Delivery' });
    await detail.locator('tr[data-attempt="1"]').getByText('200').waitFor();
    await shot('20-webhook-delivery');

    await detail.getByRole('button', { name: 'Redeliver' }).click();
    const confirm = page.getByRole('dialog', { name: 'Redeliver?' });
    await confirm.getByRole('button', { name: 'Redeliver' }).click();
    await confirm.waitFor({ state: 'hidden' });
    // The dialog follows the new attempt by itself: no refresh click.
    await detail.locator('tr[data-attempt="2"] [data-status="succeeded"]').waitFor();
    await detail.getByRole('button', { name: 'Redeliver' }).waitFor();
    expect(await detail.locator('tr[data-attempt]').count()).toBe(2);
    await shot('21-webhook-redelivered');

    const again = receiver.got.filter((g) => g.headers['x-service-delivery-id'] === delivery.id);
    expect(again).toHaveLength(2);
    expect(again[1]!.body).toEqual(again[0]!.body);
    await detail.getByRole('button', { name: 'Close' }).click();
    await detail.waitFor({ state: 'hidden' });
    // The list behind it was refreshed: two attempts now.
    await row.getByRole('cell', { name: /^2\// }).waitFor();
  }, 90_000);

  it('sends a test event from the Events page and follows it to the run it started', async () => {
    await open('/events');
    await page.getByRole('heading', { name: 'Events', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Send test event' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a test event' });
    await dialog.getByLabel('Event name').fill('user.signed_up');
    await dialog.getByLabel('Data').fill(JSON.stringify({ name: 'Grace' }, null, 2));
    await shot('22-events-send');
    await dialog.getByRole('button', { name: 'Send event' }).click();

    const result = dialog.getByTestId('send-result');
    await result.getByText('greet').waitFor();
    const link = result.getByRole('link', { name: /^run_/ });
    const runId = (await link.textContent())!.trim();
    await shot('23-events-sent');

    // The event is in the log behind the dialog, with its fan-out to that run.
    const eventRow = page.locator('tr[data-event]').filter({ hasText: 'user.signed_up' });
    await eventRow.getByRole('link', { name: runId }).waitFor({ state: 'attached' });

    await link.click();
    await page.waitForURL(`**/runs/${runId}`);
    await runIs('succeeded');
    await page.getByRole('tab', { name: 'Input & result' }).click();
    await page.getByRole('tabpanel').getByText('"Hello, Grace!"').waitFor();
    await shot('24-run-from-event');
    expect((await runOf(runId)).result).toEqual({ text: 'Hello, Grace!' });

    await page.goBack();
    await eventRow.getByRole('link', { name: runId }).waitFor();
    await eventRow.getByRole('button', { name: 'user.signed_up' }).click();
    await page.locator('tr.detail-row').getByText('"Grace"').waitFor();
    await shot('25-events');
  }, 90_000);

  it('schedules a test event for later from the Events page, lists it, and cancels it before its time', async () => {
    await open('/events');
    await page.getByRole('button', { name: 'Send test event' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a test event' });
    await dialog.getByLabel('Event name').fill('user.reminded');
    await dialog.getByLabel(/^Delay/).fill('1h');
    await dialog.getByRole('button', { name: 'Send event' }).click();
    await dialog.getByTestId('send-result').getByText(/It is stored until/).waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();

    const scheduled = page.getByTestId('scheduled-events');
    const row = scheduled.locator('tr[data-event]').filter({ hasText: 'user.reminded' });
    await row.getByText(/^in \d+m$/).waitFor();
    const id = await row.getAttribute('data-event');
    const listed = await api(dep.base, 'GET', '/v1/events/scheduled', { key: ws.secretKey });
    expect((listed.body as { id: string; scheduledFor: string }[]).map((e) => e.id)).toEqual([id]);
    await shot('34-events-scheduled');

    await row.getByRole('button', { name: 'Cancel' }).click();
    await scheduled.waitFor({ state: 'detached' });
    expect((await api(dep.base, 'GET', '/v1/events/scheduled', { key: ws.secretKey })).body).toEqual([]);
    expect((await api(dep.base, 'GET', `/v1/events/${id}`, { key: ws.secretKey })).status).toBe(404);
  }, 90_000);

  it('shows run tags as chips, filters the runs by them (kept in the URL), and sends a tagged test event', async () => {
    const acme = await send('user.signed_up', { name: 'Tess' }, ['tenant:acme', 'user:42']);
    const globex = await send('user.signed_up', { name: 'Hal' }, ['tenant:globex']);
    for (const { runId } of [acme, globex]) await eventually('the greet run to succeed', async () => runReached(await runOf(runId)));
    expect((await runOf(acme.runId)).tags).toEqual(['tenant:acme', 'user:42']);

    await open('/runs');
    const acmeRow = page.locator(`tr[data-run="${acme.runId}"]`);
    const globexRow = page.locator(`tr[data-run="${globex.runId}"]`);
    await acmeRow.getByRole('button', { name: 'user:42' }).waitFor();
    await globexRow.getByRole('button', { name: 'tenant:globex' }).waitFor();

    // Typed and Enter: the filter holds the tag, the URL says so, and the list narrows to the run carrying it.
    const tagInput = page.getByLabel('Tag', { exact: true });
    await tagInput.fill('tenant:acme');
    await tagInput.press('Enter');
    await page.getByRole('button', { name: 'Remove tag tenant:acme' }).waitFor();
    await globexRow.waitFor({ state: 'detached' });
    await acmeRow.waitFor();
    expect(new URL(page.url()).searchParams.getAll('tag')).toEqual(['tenant:acme']);
    expect(await page.locator('tr[data-run]').count()).toBe(1);
    expect(await tagInput.inputValue()).toBe('');

    // A run's chip adds its tag to the filter: every tag must match.
    await acmeRow.getByRole('button', { name: 'user:42' }).click();
    await page.getByRole('button', { name: 'Remove tag user:42' }).waitFor();
    expect(new URL(page.url()).searchParams.getAll('tag')).toEqual(['tenant:acme', 'user:42']);
    await shot('36-runs-tag-filter');
    // A reload keeps the filter, which lives in the URL.
    await page.reload();
    await page.getByRole('button', { name: 'Remove tag user:42' }).waitFor();
    await acmeRow.waitFor();
    expect(await page.locator('tr[data-run]').count()).toBe(1);
    await page.getByRole('button', { name: 'Remove tag tenant:acme' }).click();
    await page.getByRole('button', { name: 'Remove tag tenant:acme' }).waitFor({ state: 'detached' });
    expect(new URL(page.url()).searchParams.getAll('tag')).toEqual(['user:42']);
    await acmeRow.waitFor();
    expect(await page.locator('tr[data-run]').count()).toBe(1);

    // The run page shows its tags; one opens the list filtered by it.
    await acmeRow.getByRole('link', { name: acme.runId }).click();
    await runIs('succeeded');
    const runTags = page.getByTestId('run-tags');
    await runTags.getByRole('link', { name: 'user:42' }).waitFor();
    await shot('37-run-tags');
    await runTags.getByRole('link', { name: 'tenant:acme' }).click();
    await page.waitForURL((u) => u.pathname === '/runs' && u.searchParams.getAll('tag').join() === 'tenant:acme');
    await page.getByRole('button', { name: 'Remove tag tenant:acme' }).waitFor();
    await acmeRow.waitFor();
    expect(await page.locator('tr[data-run]').count()).toBe(1);

    // The event log shows the event's tags; the test-event form sends its comma-separated tags, trimmed, empties dropped.
    await open('/events');
    await page.locator(`tr[data-event="${acme.id}"]`).getByRole('link', { name: 'tenant:acme' }).waitFor();
    await page.getByRole('button', { name: 'Send test event' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a test event' });
    await dialog.getByLabel('Event name').fill('user.signed_up');
    await dialog.getByLabel('Data').fill(JSON.stringify({ name: 'Ida' }));
    await dialog.getByLabel(/^Tags/).fill(' batch:7, ,nightly ,');
    await dialog.getByRole('button', { name: 'Send event' }).click();
    const link = dialog.getByTestId('send-result').getByRole('link', { name: /^run_/ });
    const runId = (await link.textContent())!.trim();
    await dialog.getByRole('button', { name: 'Done' }).click();
    const sent = page.locator('tr[data-event]').filter({ has: page.getByRole('link', { name: runId }) });
    await sent.getByRole('link', { name: 'nightly' }).waitFor();
    await shot('38-events-tags');
    expect((await runOf(runId)).tags).toEqual(['batch:7', 'nightly']);
    const event = await api(dep.base, 'GET', `/v1/events/${await sent.getAttribute('data-event')}`, { key: ws.secretKey });
    expect(event.body.tags).toEqual(['batch:7', 'nightly']);
  }, 90_000);

  it('makes a tagged schedule from a workflow card, pauses and resumes it there, and shows why a bad pattern is refused', async () => {
    await open('/workflows');
    const card = page.getByRole('article', { name: 'greet' });
    await card.getByRole('button', { name: 'New schedule' }).click();
    const dialog = page.getByRole('dialog', { name: 'New schedule for greet' });
    await dialog.getByLabel('Cron pattern').fill('0 9 * * *');
    await dialog.getByLabel(/^Tags/).fill('tenant:acme');
    await shot('39-schedule-new');
    await dialog.getByRole('button', { name: 'Save schedule' }).click();
    await dialog.waitFor({ state: 'hidden' });

    const item = card.locator('[data-schedule]').filter({ hasText: '0 9 * * *' });
    await item.getByRole('link', { name: 'tenant:acme' }).waitFor();
    const id = (await item.getAttribute('data-schedule'))!;
    const schedule = async () => (await api(dep.base, 'GET', `/v1/schedules/${id}`, { key: ws.publicKey })).body;
    expect(await schedule()).toMatchObject({ app: APP, workflow: 'greet', cron: '0 9 * * *', timezone: 'UTC', tags: ['tenant:acme'], nextRunAt: expect.any(String) });

    // Paused from the card: the badge says so, and the API has no next tick for it.
    await item.getByRole('button', { name: `Pause schedule ${id}` }).click();
    await item.locator('[data-status="paused"]').waitFor();
    const paused = await schedule();
    expect(paused.paused).toMatchObject({ by: PERSON, at: expect.any(String) });
    expect(paused.nextRunAt).toBeUndefined();
    await shot('40-schedule-paused');
    await item.getByRole('button', { name: `Resume schedule ${id}` }).click();
    await item.getByRole('button', { name: `Pause schedule ${id}` }).waitFor();
    await item.getByText(/^next /).waitFor();
    const resumed = await schedule();
    expect(resumed.paused).toBeUndefined();
    expect(resumed.nextRunAt).toEqual(expect.any(String));

    // A pattern the API refuses: its reason shows in the form, which stays open.
    await card.getByRole('button', { name: 'New schedule' }).click();
    await dialog.getByLabel('Cron pattern').fill('daily');
    await dialog.getByRole('button', { name: 'Save schedule' }).click();
    await dialog.getByRole('alert').getByText(/cron "daily" is not valid/).waitFor();
    await shot('41-schedule-refused');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await card.locator('[data-schedule]').count()).toBe(1);
    expect((await api(dep.base, 'DELETE', `/v1/schedules/${id}`, { key: ws.secretKey })).status).toBe(204);
  }, 90_000);

  it('renders the remaining pages: runners, workflows, receivers, inbound posts, an unknown page, and dark mode', async () => {
    await open('/runners');
    const runnerRow = page.getByRole('row').filter({ hasText: APP });
    await runnerRow.locator('[data-status="live"]').waitFor();
    await runnerRow.getByText('matches').waitFor();
    await shot('26-runners');

    const sched = await api(dep.base, 'POST', '/v1/schedules', {
      key: ws.secretKey,
      body: { app: APP, workflow: 'nightly-report', cron: '0 9 * * *', timezone: 'Europe/Paris', externalId: 'acme', data: { tenant: 'acme' } },
    });
    expect(sched.status).toBe(201);
    await open('/workflows');
    for (const w of ['fulfil-order', 'nightly-report', 'send-invoice', 'refund-agent', 'greet']) {
      await page.getByRole('article', { name: w }).waitFor();
    }
    await page.getByRole('article', { name: 'nightly-report' }).getByText('5 runs at a time, and 1 run at a time per event.data.day').waitFor();
    await page.getByRole('article', { name: 'quick-quote' }).getByText('One run at a time, from start to end: the others wait their turn').waitFor();
    await shot('27-workflows');

    // Paused and resumed from its card.
    const report = page.getByRole('article', { name: 'nightly-report' });
    // Exact: each of its schedules has a "Pause schedule …" button too.
    await report.getByRole('button', { name: 'Pause', exact: true }).click();
    // The pause asks whether to hold its events for the resume.
    const pauseDialog = page.getByRole('dialog', { name: 'Pause nightly-report' });
    await pauseDialog.getByLabel('Hold its events: start their runs once it is resumed').check();
    await pauseDialog.getByRole('button', { name: 'Pause', exact: true }).click();
    await report.locator('[data-status="paused"]').waitFor();
    await report.getByText(/^Paused by /).waitFor();
    await report.getByText(/Its events are held \(0 so far\)/).waitFor();
    const listed = async () => ((await api(dep.base, 'GET', '/v1/workflows', { key: ws.publicKey })).body as { name: string; paused?: unknown }[]).find((w) => w.name === 'nightly-report')!;
    expect((await listed()).paused).toMatchObject({ by: expect.any(String), hold: true });
    await shot('35-workflow-paused');
    await report.getByRole('button', { name: 'Resume', exact: true }).click();
    await report.getByRole('button', { name: 'Pause', exact: true }).waitFor();
    expect((await listed()).paused).toBeUndefined();

    // Its schedule made through the API, deleted from the card.
    const item = report.locator(`[data-schedule="${sched.body.id}"]`);
    await item.getByText('Europe/Paris').waitFor();
    await item.getByText('acme').waitFor();
    await item.getByRole('button', { name: 'Delete schedule acme' }).click();
    await item.waitFor({ state: 'detached' });
    expect((await api(dep.base, 'GET', `/v1/schedules/${sched.body.id}`, { key: ws.publicKey })).status).toBe(404);

    // A refused partner post, so the inbound log has something to show.
    const receivers = await api(dep.base, 'GET', '/v1/webhook-receivers', { key: ws.publicKey });
    const slug = (receivers.body as { slug: string }[])[0]!.slug;
    const refused = await api(dep.base, 'POST', `/v1/webhooks/${slug}`, { body: { amount: 12 }, headers: { 'x-service-signature': 't=1&s=00' } });
    expect(refused.status).toBe(401);

    await open('/webhooks?tab=receivers');
    await page.getByRole('row').filter({ hasText: 'Stripe payments' }).getByText('payment.received').waitFor();
    // A receiver with a transform, made in the form; its secret shown once signs a post it filters out.
    await page.getByRole('button', { name: 'Add receiver' }).click();
    const form = page.getByRole('dialog');
    await form.getByLabel('Event name', { exact: true }).fill('github');
    await form.locator('#rc-name').fill('GitHub');
    await form.getByText('Transform (optional)').click();
    await form.getByLabel('Only posts where').fill("headers['x-github-event'] != 'ping'");
    await form.getByLabel('Event name from').fill("'github/' + headers['x-github-event']");
    await form.getByRole('button', { name: 'Add receiver' }).click();
    const ghSecret = (await page.getByTestId('secret').locator('code').textContent())!;
    await page.getByRole('button', { name: 'I have copied it' }).click();
    const ghRow = page.getByRole('row').filter({ hasText: 'GitHub' });
    await ghRow.getByText("'github/' + headers['x-github-event']").waitFor();
    await ghRow.getByText("headers['x-github-event'] != 'ping'").waitFor();
    await shot('28-webhooks-receivers');
    const ghSlug = ((await api(dep.base, 'GET', '/v1/webhook-receivers', { key: ws.publicKey })).body as { name?: string; slug: string }[]).find((r) => r.name === 'GitHub')!.slug;
    const ping = '{"zen":"Approachable is better than simple."}';
    const filtered = await api(dep.base, 'POST', `/v1/webhooks/${ghSlug}`, {
      raw: ping,
      headers: { 'x-hub-signature-256': `sha256=${createHmac('sha256', ghSecret).update(ping).digest('hex')}`, 'x-github-event': 'ping' },
    });
    expect(filtered.body).toMatchObject({ filtered: true });
    await page.getByRole('tab', { name: 'Inbound posts' }).click();
    await page.getByRole('row').filter({ hasText: slug }).waitFor();
    await page.getByRole('row').filter({ hasText: ghSlug }).getByText('filtered (no event)').waitFor();
    await shot('29-webhooks-inbound');

    await open('/no/such/page');
    await page.getByText('No such page').waitFor();
    await shot('30-not-found');

    const dark = await context.browser()!.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: 'dark', locale: 'en-US', timezoneId: 'UTC' });
    try {
      const p = await dark.newPage();
      await open('/runs', p);
      await p.locator('tr[data-run]').first().waitFor();
      await shot('31-dark-runs', p);
      await p.locator('tr[data-run]').filter({ hasText: 'send-invoice' }).first().getByRole('link').click();
      await p.getByTestId('run-status').waitFor();
      await p.locator('[data-step]').first().waitFor();
      await shot('32-dark-run', p);
    } finally {
      await dark.close();
    }
    // Nothing the pages did threw in the browser.
    // (The sign-in probes answer 401 for the bad key and 400 for the empty bulk replay: Chromium logs those loads.)
    expect(consoleErrors.filter((e) => !/Failed to load resource: the server responded with a status of 40[01]/.test(e))).toEqual([]);
  }, 90_000);
});
