import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ApprovalDecision } from '@dws/sdk';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { realInfra } from '../src/infra.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/**
 * The MCP server at /v1/mcp driven by the MCP SDK's own client over
 * streamable HTTP, as an agent would: list the tools, read a run with its
 * steps and logs, find the approval a run is parked on and approve it with
 * edited args. The approval records decidedVia mcp and the run finishes
 * with the edited args. On `pnpm dev` (embedded) and the six-process fleet.
 */
const modes: Mode[] = realInfra() ? ['embedded', 'fleet'] : ['embedded'];
if (!realInfra()) console.warn('\n!!! Postgres/NATS missing: only the embedded MCP test runs (fleet SKIPPED) !!!\n');

interface Transfer {
  to: string;
  amount: number;
}
type ToolResult = { isError?: boolean; content: { type: string; text?: string }[] };

/** The JSON a tool answered, or the failure with the tool's error text. */
function json<T = any>(r: unknown): T {
  const res = r as ToolResult;
  const text = res.content[0]?.text ?? '';
  if (res.isError) throw new Error(`tool error: ${text}`);
  return JSON.parse(text) as T;
}

describe.each(modes)('MCP server on %s', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  const clients: Client[] = [];

  beforeAll(async () => {
    dep = await startDeployment(mode);
    runner = await startRunner(dep, (r) => {
      r.workflow<Transfer>('payout-agent', { triggers: [{ event: 'agent.payout_proposed' }] }, async ({ event, step, logger }) => {
        logger.info('payout proposed', { to: event.data.to });
        const decision = await step.approval<Transfer>('payout-gate', {
          tool: 'transfer',
          args: event.data,
          risk: 'critical',
          summary: `Pay ${event.data.amount} to ${event.data.to}`,
        });
        const paid =
          decision.status === 'approved' ? await step.run('transfer', () => ({ paid: decision.args.amount, to: decision.args.to })) : null;
        return { decision, paid };
      });
    });
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  async function connect(key: string): Promise<Client> {
    const client = new Client({ name: 'e2e-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${dep.base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
    );
    clients.push(client);
    return client;
  }

  it('lists tools, reads a parked run, and approves it with edits: decidedVia mcp', async () => {
    const reader = await connect(dep.publicKey);
    const agent = await connect(dep.secretKey);

    const { tools } = await reader.listTools();
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['list_runs', 'get_run', 'wait_for_run', 'list_approvals', 'decide_approval', 'cancel_run', 'bulk_cancel_runs', 'send_event']),
    );

    // The agent sends the triggering event through MCP too.
    const to = `acct-${Date.now()}`;
    const sent = json<{ runId: string }>(
      await agent.callTool({ name: 'send_event', arguments: { name: 'agent.payout_proposed', data: { to, amount: 900 } } }),
    );
    const runId = sent.runId;
    expect(runId).toEqual(expect.any(String));

    const parked = await eventually('the run to park on its approval (needsAttention) in list_runs', async () => {
      const runs = json<{ id: string; status: string; needsAttention?: boolean }[]>(
        await reader.callTool({ name: 'list_runs', arguments: { workflow: 'payout-agent', limit: 50 } }),
      );
      const run = runReached(
        runs.find((r) => r.id === runId),
        ['queued', 'running', 'waiting'],
      );
      return run?.needsAttention ? run : undefined;
    });
    expect(parked).toMatchObject({ id: runId, status: 'waiting', needsAttention: true });

    // Waiting for it to end gives it back as it is once timeoutMs has passed.
    expect(json(await reader.callTool({ name: 'wait_for_run', arguments: { runId, timeoutMs: 200 } }))).toMatchObject({ id: runId, status: 'waiting' });
    const detail = json(await reader.callTool({ name: 'get_run', arguments: { runId } }));
    expect(detail.run).toMatchObject({ id: runId, status: 'waiting', workflow: 'payout-agent', input: { to, amount: 900 } });
    expect(detail.steps.map((s: { name: string }) => s.name)).toContain('payout-gate');
    expect(detail.logs.map((l: { message: string }) => l.message)).toContain('payout proposed');

    const [approval] = json<{ id: string; status: string; tool: string; args: unknown }[]>(
      await reader.callTool({ name: 'list_approvals', arguments: { runId, status: 'pending' } }),
    );
    expect(approval).toMatchObject({ runId, status: 'pending', tool: 'transfer', args: { to, amount: 900 } });

    // A public key reads but may not decide: a tool error, and the approval stays open.
    const refused = (await reader.callTool({
      name: 'decide_approval',
      arguments: { approvalId: approval!.id, status: 'approved' },
    })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(JSON.parse(refused.content[0]!.text!).error.code).toBe('key_read_only');
    expect(json(await reader.callTool({ name: 'get_approval', arguments: { approvalId: approval!.id } })).status).toBe('pending');

    const edited = { to, amount: 90 };
    const decided = json(
      await agent.callTool({ name: 'decide_approval', arguments: { approvalId: approval!.id, status: 'approved', args: edited } }),
    );
    expect(decided).toMatchObject({
      id: approval!.id,
      status: 'approved',
      editedArgs: edited,
      decidedVia: 'mcp',
      decidedBy: 'dev-secret',
      decidedAt: expect.any(String),
    });
    // The REST read agrees: the record carries the channel.
    const rest = await api(dep.base, 'GET', `/v1/approvals/${approval!.id}`, { key: dep.publicKey });
    expect(rest.body).toMatchObject({ status: 'approved', decidedVia: 'mcp', decidedBy: 'dev-secret', editedArgs: edited });

    const again = (await agent.callTool({
      name: 'decide_approval',
      arguments: { approvalId: approval!.id, status: 'denied' },
    })) as ToolResult;
    expect({ isError: again.isError, code: JSON.parse(again.content[0]!.text!).error.code }).toEqual({
      isError: true,
      code: 'approval_not_open',
    });

    const done = json(await reader.callTool({ name: 'wait_for_run', arguments: { runId, timeoutMs: 30_000 } }));
    expect(done.status).toBe('succeeded');
    const result = done.result as { decision: ApprovalDecision<Transfer>; paid: unknown };
    expect(result.decision).toMatchObject({
      gated: true,
      approvalId: approval!.id,
      status: 'approved',
      args: edited,
      decidedBy: 'dev-secret',
      decidedVia: 'mcp',
    });
    expect(result.paid).toEqual({ paid: 90, to });
    expect(parked).toBeDefined();
  }, 120_000);

  it("cancels one tenant's parked runs by tag, and no other's", async () => {
    const agent = await connect(dep.secretKey);
    const tenant = `tenant:${Date.now()}`;
    const send = async (tags: string[], session?: string) =>
      json<{ runId: string }>(await agent.callTool({ name: 'send_event', arguments: { name: 'agent.payout_proposed', data: { to: 'acct', amount: 5 }, tags, session } })).runId;
    const mine = [await send([tenant], `chat-${tenant}`), await send([tenant, 'vip'])];
    // The event's session is its run's.
    expect(json<{ run: { session?: string } }>(await agent.callTool({ name: 'get_run', arguments: { runId: mine[0]! } })).run.session).toBe(`chat-${tenant}`);
    const other = await send(['tenant:other']);
    const parkedAll = async () => {
      const runs = await Promise.all([...mine, other].map(async (id) => json<{ run: { status: string } }>(await agent.callTool({ name: 'get_run', arguments: { runId: id } })).run));
      return runs.every((r) => r.status === 'waiting') ? true : undefined;
    };
    await eventually('the three runs parked on their approvals', parkedAll);
    const res = json<{ matched: number; cancelled: number }>(await agent.callTool({ name: 'bulk_cancel_runs', arguments: { tags: [tenant], workflow: 'payout-agent' } }));
    expect(res).toMatchObject({ matched: 2, cancelled: 2 });
    for (const id of mine) expect(json<{ run: { status: string } }>(await agent.callTool({ name: 'get_run', arguments: { runId: id } })).run.status).toBe('cancelled');
    expect(json<{ run: { status: string } }>(await agent.callTool({ name: 'get_run', arguments: { runId: other } })).run.status).toBe('waiting');
    // A public key cannot.
    const reader = await connect(dep.publicKey);
    expect((await reader.callTool({ name: 'bulk_cancel_runs', arguments: { tags: ['tenant:other'] } })).isError).toBe(true);
    await agent.callTool({ name: 'cancel_run', arguments: { runId: other } });
  }, 120_000);
});
