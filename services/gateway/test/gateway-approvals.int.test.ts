import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { conflict } from '@dws/protocol';
import type { ApiCall } from '@dws/runtime';
import { http, infraAvailable, startTestGateway, type TestGateway } from './harness.js';

if (!infraAvailable) console.warn('\n!!! Postgres/NATS missing: gateway approvals tests SKIPPED !!!\n');
const d = infraAvailable ? describe : describe.skip;

type ToolResult = { isError?: boolean; content: { type: string; text?: string }[] };
const textOf = (r: ToolResult) => JSON.parse(r.content[0]!.text!) as any;

/**
 * The gateway side of approvals and of the MCP server, on real Postgres and
 * NATS with stand-ins for the services answering on the real bus: what is
 * forwarded (params, query, raw body, the caller with its actor and
 * channel), who may decide, and that MCP tools meet the same rules.
 */
d('gateway approvals and MCP', () => {
  let g: TestGateway;
  let off: TestGateway;
  const calls: { op: string; call: ApiCall }[] = [];
  const record = (op: string, body?: (call: ApiCall) => unknown) => async (call: ApiCall) => {
    calls.push({ op, call });
    if (call.params.id === 'apr_closed') throw conflict('approval_not_open', 'Approval apr_closed is not open.');
    return { body: body ? body(call) : { op, id: call.params.id } };
  };
  const last = () => calls[calls.length - 1]!;
  const stubs = (t: TestGateway) => {
    t.stub('approvals', {
      'approvals.list': record('approvals.list', () => [{ id: 'apr_1', status: 'pending' }]),
      'approvals.get': record('approvals.get'),
      'approvals.decide': record('approvals.decide', (call) => ({
        id: call.params.id,
        status: (call.body as { status: string }).status,
        decidedBy: call.caller.actor,
        decidedVia: call.caller.via,
      })),
    });
    t.stub('scheduler', {
      'runs.list': record('runs.list', () => [{ id: 'run_1', status: 'waiting', needsAttention: true }]),
      'runs.get': record('runs.get', (call) => ({ id: call.params.id, status: 'waiting' })),
      'runs.steps': record('runs.steps', () => [{ name: 'ship', op: 'Approval' }]),
      'runs.logs': record('runs.logs', () => [{ seq: 1, message: 'hi' }]),
      'runs.cancel': record('runs.cancel'),
      'runs.replay': async (call) => (calls.push({ op: 'runs.replay', call }), { status: 201, body: { id: 'run_2', status: 'queued' } }),
    });
    t.stub('ingest', {
      'events.ingest': async (call) => (calls.push({ op: 'events.ingest', call }), { status: 202, body: { woke: 0, triggered: [] } }),
    });
  };

  beforeAll(async () => {
    g = await startTestGateway();
    off = await startTestGateway({ env: { SERVICE_AUTH: 'off' } });
    stubs(g);
    stubs(off);
  }, 60_000);
  afterAll(async () => {
    await g?.stop();
    await off?.stop();
  }, 30_000);

  async function mcpClient(base: string, key: string | undefined, headers: Record<string, string> = {}): Promise<Client> {
    const client = new Client({ name: 'gateway-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), {
      requestInit: { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } },
    });
    await client.connect(transport);
    return client;
  }

  describe('REST routes', () => {
    it('forwards the reads with the validated query and refuses bad filters before the service', async () => {
      const list = await http(g.base, 'GET', '/v1/approvals?status=pending&runId=run_9&limit=5000', { key: g.publicKey });
      expect(list.status).toBe(200);
      expect(last()).toMatchObject({
        op: 'approvals.list',
        call: { query: { status: 'pending', runId: 'run_9', limit: 1000 }, caller: { keyKind: 'public' } },
      });
      expect((await http(g.base, 'GET', '/v1/approvals/apr_7', { key: g.publicKey })).body).toEqual({ op: 'approvals.get', id: 'apr_7' });

      const before = calls.length;
      for (const [q, code] of [
        ['status=open', 'invalid_status'],
        ['limit=1.5', 'invalid_limit'],
        ['limit=abc', 'invalid_limit'],
        ['limit=0', 'invalid_limit'],
      ] as const) {
        const r = await http(g.base, 'GET', `/v1/approvals?${q}`, { key: g.secretKey });
        expect({ q, status: r.status, code: r.body.error.code }).toEqual({ q, status: 400, code });
      }
      expect(calls.length).toBe(before);
    });

    it('lets a secret or console key decide, refuses a public key, and names the decider from the caller only', async () => {
      const denied = await http(g.base, 'POST', '/v1/approvals/apr_1/decision', { key: g.publicKey, body: { status: 'approved' } });
      expect({ status: denied.status, code: denied.body.error.code }).toEqual({ status: 403, code: 'key_read_only' });

      // A secret key cannot name a person: X-Service-Actor and body decidedBy/decidedVia change nothing.
      const raw = '{"status":"approved","args":{"amount":5},"decidedBy":"mallory","decidedVia":"console"}';
      const bySecret = await http(g.base, 'POST', '/v1/approvals/apr_1/decision', {
        key: g.secretKey,
        raw,
        headers: { 'x-service-actor': 'mallory@example.com' },
      });
      expect(bySecret.status).toBe(200);
      expect(bySecret.body).toEqual({ id: 'apr_1', status: 'approved', decidedBy: 'dev-secret', decidedVia: 'api' });
      expect(last().call).toMatchObject({
        params: { id: 'apr_1' },
        body: { status: 'approved', args: { amount: 5 } },
        caller: { actor: 'dev-secret', keyKind: 'secret', via: 'api' },
      });

      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'acme' } })).body;
      const byPerson = await http(g.base, 'POST', '/v1/approvals/apr_2/decision', {
        key: ws.consoleKey,
        body: { status: 'denied' },
        headers: { 'x-service-actor': 'ada@acme.test' },
      });
      expect(byPerson.body).toEqual({ id: 'apr_2', status: 'denied', decidedBy: 'ada@acme.test', decidedVia: 'console' });
      expect(last().call.caller.workspaceId).toBe(ws.id);
      const byConsole = await http(g.base, 'POST', '/v1/approvals/apr_3/decision', { key: ws.consoleKey, body: { status: 'denied' } });
      expect(byConsole.body).toMatchObject({ decidedBy: 'console', decidedVia: 'api' });
    });

    it('refuses a decision body that is not one, and passes a service 409 through', async () => {
      const before = calls.length;
      for (const body of [undefined, {}, { status: 'maybe' }, { status: 'approved', response: 7 }, []]) {
        const r = await http(g.base, 'POST', '/v1/approvals/apr_1/decision', { key: g.secretKey, body });
        expect({ body, status: r.status, code: r.body.error.code }).toEqual({ body, status: 400, code: 'invalid_decision' });
      }
      expect(calls.length).toBe(before);
      const closed = await http(g.base, 'POST', '/v1/approvals/apr_closed/decision', { key: g.secretKey, body: { status: 'approved' } });
      expect({ status: closed.status, code: closed.body.error.code }).toEqual({ status: 409, code: 'approval_not_open' });
    });

    it('records the channel as unrecorded with authentication off', async () => {
      const r = await http(off.base, 'POST', '/v1/approvals/apr_1/decision', { body: { status: 'approved' } });
      expect(r.body).toEqual({ id: 'apr_1', status: 'approved', decidedBy: 'anonymous', decidedVia: 'unrecorded' });
      // CONTRACT: with authentication off every decision is unrecorded, one made through MCP too.
      const client = await mcpClient(off.base, undefined);
      const viaMcp = textOf((await client.callTool({ name: 'decide_approval', arguments: { approvalId: 'apr_1', status: 'approved' } })) as ToolResult);
      expect(viaMcp).toMatchObject({ decidedVia: 'unrecorded' });
      await client.close();
    });

    it('documents the three endpoints, the Approval schema and needsAttention on runs', async () => {
      const doc = (await http(g.base, 'GET', '/v1/openapi.json')).body;
      expect(Object.keys(doc.paths['/approvals'])).toEqual(['get']);
      expect(Object.keys(doc.paths['/approvals/{id}'])).toEqual(['get']);
      const decide = doc.paths['/approvals/{id}/decision'].post;
      expect(Object.keys(decide.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404', '409']));
      expect(decide.requestBody).toMatchObject({
        required: true,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/DecisionBody' } } },
      });
      expect(doc.components.schemas.DecisionBody.properties.status.enum).toEqual(['approved', 'denied']);
      const approval = doc.components.schemas.Approval;
      expect(approval.properties.status.enum).toEqual(['pending', 'escalated', 'approved', 'denied', 'cancelled']);
      expect(approval.properties.decidedVia.enum).toEqual(['console', 'mcp', 'api', 'timeout', 'unrecorded']);
      expect(approval.required).toEqual(
        expect.arrayContaining(['id', 'runId', 'workflow', 'app', 'step', 'tool', 'onTimeout', 'allow', 'status', 'requestedAt']),
      );
      expect(approval.required).not.toContain('decidedBy');
      expect(doc.components.schemas.Run.properties.needsAttention).toMatchObject({ const: true });
      const status = (doc.paths['/approvals'].get.parameters as { name: string; schema: { enum?: string[] } }[]).find(
        (p) => p.name === 'status',
      )!;
      expect(status.schema.enum).toEqual(['pending', 'escalated', 'approved', 'denied', 'cancelled']);
    });
  });

  describe('MCP server', () => {
    it('authenticates like the API: no key or an unknown key is 401 with the error body', async () => {
      const init = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      };
      for (const key of [undefined, 'sk_nope']) {
        const r = await http(g.base, 'POST', '/v1/mcp', { key, body: init });
        expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 401, code: 'unauthorized' });
      }
      const bad = await http(g.base, 'POST', '/v1/mcp', { key: g.secretKey, body: { hello: 1 } });
      expect({ status: bad.status, code: bad.body.error.code }).toEqual({ status: 400, code: 'invalid_mcp_message' });
      const get = await http(g.base, 'GET', '/v1/mcp', { key: g.secretKey });
      expect({ status: get.status, code: get.body.error.code }).toEqual({ status: 405, code: 'method_not_allowed' });
      // A plain JSON-RPC call without the SDK works too (no session, JSON answer).
      const plain = await http(g.base, 'POST', '/v1/mcp', { key: g.publicKey, body: init });
      expect(plain.status).toBe(200);
      expect(plain.body).toMatchObject({
        jsonrpc: '2.0',
        id: 1,
        result: { serverInfo: { name: 'durable-workflow-service' }, capabilities: { tools: {} } },
      });
    });

    it('lists the read and write tools', async () => {
      const client = await mcpClient(g.base, g.publicKey);
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(
        [
          'bulk_cancel_runs',
          'cancel_run',
          'decide_approval',
          'get_approval',
          'get_run',
          'list_approvals',
          'list_events',
          'list_runners',
          'list_runs',
          'list_workflows',
          'pause_run',
          'pause_workflow',
          'replay_run',
          'resume_run',
          'resume_workflow',
          'send_event',
          'wait_for_run',
        ].sort(),
      );
      const decide = tools.find((t) => t.name === 'decide_approval')!;
      expect(decide.annotations?.readOnlyHint).toBe(false);
      expect(decide.inputSchema.required).toEqual(expect.arrayContaining(['approvalId', 'status']));
      expect(tools.find((t) => t.name === 'list_runs')!.annotations?.readOnlyHint).toBe(true);
      expect(tools.find((t) => t.name === 'wait_for_run')!.annotations?.readOnlyHint).toBe(true);
      await client.close();
    });

    it('reads through the same routes and tenancy, with via mcp', async () => {
      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'mcp-reads' } })).body;
      const client = await mcpClient(g.base, ws.publicKey);
      const runs = (await client.callTool({ name: 'list_runs', arguments: { status: 'waiting', q: 'ship', limit: 500 } })) as ToolResult;
      expect(textOf(runs)).toEqual([{ id: 'run_1', status: 'waiting', needsAttention: true }]);
      expect(last().call).toMatchObject({
        query: { status: 'waiting', q: 'ship', limit: 200 },
        caller: { workspaceId: ws.id, keyKind: 'public', via: 'mcp' },
      });

      const run = textOf((await client.callTool({ name: 'get_run', arguments: { runId: 'run_1' } })) as ToolResult);
      expect(run).toEqual({
        run: { id: 'run_1', status: 'waiting' },
        steps: [{ name: 'ship', op: 'Approval' }],
        logs: [{ seq: 1, message: 'hi' }],
      });
      expect(calls.slice(-3).map((c) => c.op)).toEqual(['runs.get', 'runs.steps', 'runs.logs']);

      await client.callTool({ name: 'list_approvals', arguments: { status: 'pending', runId: 'run_1' } });
      expect(last()).toMatchObject({ op: 'approvals.list', call: { query: { status: 'pending', runId: 'run_1' } } });

      // The route's own rules answer, as a tool error carrying the API's error body.
      const bad = (await client.callTool({ name: 'list_runs', arguments: { limit: 0 } })) as ToolResult;
      expect(bad.isError).toBe(true);
      await client.close();
    });

    it('refuses every write tool to a public key with a tool error, and calls nothing', async () => {
      const client = await mcpClient(g.base, g.publicKey);
      const before = calls.length;
      for (const [name, args] of [
        ['decide_approval', { approvalId: 'apr_1', status: 'approved' }],
        ['cancel_run', { runId: 'run_1' }],
        ['replay_run', { runId: 'run_1' }],
        ['send_event', { name: 'x' }],
        ['pause_workflow', { app: 'a', workflow: 'w' }],
        ['bulk_cancel_runs', { tags: ['tenant:acme'] }],
      ] as const) {
        const r = (await client.callTool({ name, arguments: args })) as ToolResult;
        expect({ name, isError: r.isError, body: textOf(r) }).toEqual({
          name,
          isError: true,
          body: { error: { code: 'key_read_only', message: expect.any(String) } },
        });
      }
      expect(calls.length).toBe(before);
      await client.close();
    });

    it('decides with decidedVia mcp and the key as decider; a console key names its person', async () => {
      const secret = await mcpClient(g.base, g.secretKey, { 'x-service-actor': 'mallory@example.com' });
      const decided = textOf(
        (await secret.callTool({
          name: 'decide_approval',
          arguments: { approvalId: 'apr_5', status: 'approved', args: { to: 'b' }, response: 'ok' },
        })) as ToolResult,
      );
      expect(decided).toEqual({ id: 'apr_5', status: 'approved', decidedBy: 'dev-secret', decidedVia: 'mcp' });
      expect(last().call).toMatchObject({ params: { id: 'apr_5' }, body: { status: 'approved', args: { to: 'b' }, response: 'ok' } });

      const conflict = (await secret.callTool({
        name: 'decide_approval',
        arguments: { approvalId: 'apr_closed', status: 'denied' },
      })) as ToolResult;
      expect({ isError: conflict.isError, code: textOf(conflict).error.code }).toEqual({ isError: true, code: 'approval_not_open' });

      await secret.callTool({ name: 'cancel_run', arguments: { runId: 'run_4' } });
      expect(last()).toMatchObject({ op: 'runs.cancel', call: { params: { id: 'run_4' }, caller: { via: 'mcp', actor: 'dev-secret' } } });
      expect(textOf((await secret.callTool({ name: 'replay_run', arguments: { runId: 'run_4', input: { a: 1 } } })) as ToolResult)).toEqual(
        { id: 'run_2', status: 'queued' },
      );
      expect(last().call.body).toEqual({ input: { a: 1 } });
      expect(last().call.headers).toEqual({});
      await secret.callTool({ name: 'replay_run', arguments: { runId: 'run_4', idempotencyKey: 'agent-try-1' } });
      expect(last().call).toMatchObject({ params: { id: 'run_4' }, headers: { 'idempotency-key': 'agent-try-1' } });
      const badKey = (await secret.callTool({ name: 'replay_run', arguments: { runId: 'run_4', idempotencyKey: 'two words' } })) as ToolResult;
      expect({ isError: badKey.isError, code: textOf(badKey).error.code }).toEqual({ isError: true, code: 'invalid_idempotency_key' });
      await secret.callTool({ name: 'send_event', arguments: { name: 'order.placed', data: { n: 1 } } });
      expect(last()).toMatchObject({
        op: 'events.ingest',
        call: { body: { name: 'order.placed', data: { n: 1 } }, caller: { via: 'mcp' } },
      });
      await secret.close();

      const ws = (await http(g.base, 'POST', '/v1/admin/workspaces', { key: g.adminToken, body: { name: 'mcp-console' } })).body;
      const person = await mcpClient(g.base, ws.consoleKey, { 'x-service-actor': 'ada@acme.test' });
      const byAda = textOf(
        (await person.callTool({ name: 'decide_approval', arguments: { approvalId: 'apr_6', status: 'denied' } })) as ToolResult,
      );
      expect(byAda).toEqual({ id: 'apr_6', status: 'denied', decidedBy: 'ada@acme.test', decidedVia: 'mcp' });
      expect(last().call.caller.workspaceId).toBe(ws.id);
      await person.close();
    });
  });
});
