import type { Request, Response } from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Bus } from '@dws/bus';
import type { ApiBatcher } from '@dws/runtime';
import type { Logger } from '@dws/log';
import { errorBody, invalid, isServiceError, ServiceError } from '@dws/protocol';
import type { AuthedCaller, Authenticator } from './auth.js';
import { forwardRoute, validateInput } from './forward.js';
import { MCP_TOOLS, type CallRoute } from './mcp-tools.js';
import type { RouteSpec } from './route-table.js';
import { closeSignal } from './run-wait.js';
import type { Streams } from './streams.js';

export interface McpDeps {
  bus: Bus;
  batcher: ApiBatcher;
  auth: Authenticator;
  log: Logger;
  routes: RouteSpec[];
  version: string;
  /** What serves the one gateway-local route a tool calls (GET /runs/{id}/wait). */
  streams: Pick<Streams, 'runWait'>;
}

const INSTRUCTIONS =
  'Tools of a durable workflow service: read runs, steps, logs, approvals, events, runners and workflows; ' +
  'decide approvals that park runs, control runs and send events (write tools need a secret or console key).';

/**
 * The MCP server at POST /v1/mcp, stateless: each request gets a fresh
 * server and transport bound to the caller the REST pipeline authenticated,
 * and answers JSON (no SSE, no session). Every tool calls routes of the
 * table through validateInput and forwardRoute, so it obeys the same
 * schemas, key rules and tenancy as the REST API; its calls carry via `mcp`
 * (SPEC Approval decidedVia: the request reached the /mcp path), or
 * `unrecorded` with authentication off (CONTRACT).
 */
export class McpEndpoint {
  private readonly byKey = new Map<string, RouteSpec>();

  constructor(private readonly d: McpDeps) {
    for (const r of d.routes) this.byKey.set(`${r.method} ${r.path}`, r);
  }

  async handle(req: Request, res: Response, authed: AuthedCaller, body: unknown): Promise<void> {
    // CONTRACT: with SERVICE_AUTH=off every decision is `unrecorded`, MCP's too.
    const caller: AuthedCaller = { ...authed, via: authed.via === 'unrecorded' ? 'unrecorded' : 'mcp' };
    const server = this.server(caller, closeSignal(res));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      // The body was read, bounded and checked by the API's jsonBody; the transport gets it parsed.
      // We always answer JSON, so the Accept and Content-Type the transport insists on are ours to state.
      const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
      const version = req.headers['mcp-protocol-version'];
      if (typeof version === 'string') headers['mcp-protocol-version'] = version;
      const answer = await transport.handleRequest(new Request('http://gateway.local/v1/mcp', { method: 'POST', headers }), {
        parsedBody: body,
      });
      const text = await answer.text();
      if (answer.status >= 400) throw transportError(answer.status, text);
      res.status(answer.status);
      const type = answer.headers.get('content-type');
      if (type) res.setHeader('content-type', type);
      if (text) res.send(text);
      else res.end();
    } finally {
      await server.close();
    }
  }

  private server(caller: AuthedCaller, gone: AbortSignal): McpServer {
    const server = new McpServer(
      { name: 'durable-workflow-service', version: this.d.version },
      { capabilities: { tools: {} }, instructions: INSTRUCTIONS },
    );
    const call = this.callRoute(caller, gone);
    for (const tool of MCP_TOOLS) {
      server.registerTool(
        tool.name,
        {
          title: tool.title,
          description: tool.description,
          inputSchema: tool.input,
          annotations: { readOnlyHint: !tool.write, openWorldHint: false },
        },
        async (args: Record<string, unknown>): Promise<CallToolResult> => {
          try {
            if (tool.write) this.d.auth.authorize(caller, { write: true });
            const value = await tool.run(args, call);
            return { content: [{ type: 'text', text: JSON.stringify(value ?? null, null, 2) }] };
          } catch (err) {
            // The error body the REST API would answer, as a tool error the agent can read.
            const known = isServiceError(err);
            if (!known) this.d.log.error({ err, tool: tool.name, requestId: caller.requestId }, 'mcp tool failed');
            const body = known ? errorBody(err.code, err.message) : errorBody('internal', 'Internal error.');
            return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
          }
        },
      );
    }
    return server;
  }

  private callRoute(caller: AuthedCaller, gone: AbortSignal): CallRoute {
    return async (method, path, input = {}) => {
      const route = this.byKey.get(`${method} ${path}`);
      const waits = route?.target.kind === 'local' && route.target.name === 'runWait';
      if (!route || (route.target.kind !== 'forward' && !waits)) throw new Error(`no forwarded route ${method} ${path}`);
      // The route's own access rule, exactly as its REST call would meet it.
      this.d.auth.authorize(caller, { write: route.access === 'write' });
      const raw = input.json === undefined ? undefined : JSON.stringify(input.json);
      const v = validateInput(
        route,
        { params: input.params ?? {}, query: input.query ?? {}, body: raw === undefined ? undefined : { parsed: input.json, raw }, idempotencyKey: input.idempotencyKey },
        caller,
      );
      const reply = waits ? await this.d.streams.runWait(caller, v.params.id!, v.query.timeoutMs as number | undefined, gone) : await forwardRoute(this.d, route, caller, v);
      return reply?.bodyJson === undefined ? null : (JSON.parse(reply.bodyJson) as unknown);
    };
  }
}

/** A message the transport refused, as the API's error body (its own is JSON-RPC). */
function transportError(status: number, text: string): ServiceError {
  let message = 'The MCP transport refused the request.';
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof m === 'string') message = m;
  } catch {
    /* not JSON: keep the generic message */
  }
  return status === 400 ? invalid('invalid_mcp_message', message) : new ServiceError(status, 'mcp_refused', message);
}
