import { z } from 'zod';
import { MAX_JSON_DEPTH } from '@dws/http';
import type { RouteSpec } from './route-table.js';
import { registry } from './schemas.js';

type Json = Record<string, unknown>;

const REF = (id: string) => `#/components/schemas/${id}`;
const toOpenApiPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

const ERRORS: Record<number, string> = {
  400:
    'Invalid input: bad JSON (`invalid_json`), a body nested deeper than ' +
    `${MAX_JSON_DEPTH} levels (\`json_too_deep\`), a string that is not valid Unicode or holds U+0000 (\`invalid_unicode\`), ` +
    'a body whose Content-Encoding does not decode (`invalid_body_encoding`), a field or parameter out of range, a cursor from another sort.',
  401: 'Missing or unknown key.',
  403: 'A public key on a write, or a suspended workspace on a run-creating call.',
  404: 'Unknown route, or an id this workspace does not have (another workspace’s ids read as 404).',
  409: 'The resource is not in a state that allows this.',
  422: 'The Idempotency-Key was used within 24 h for another call (another run, action or body): `idempotency_key_reused`.',
  405: 'The method is not allowed here (a WebSocket upgrade must be a GET).',
  415: 'A Content-Encoding other than gzip, deflate, br or identity (`unsupported_encoding`).',
  426: 'A WebSocket upgrade is required, or its Sec-WebSocket-Version is not 13.',
  413: 'Request body over 1 MiB.',
  500: 'Internal error (never with details).',
  503: 'The owning service did not answer in time.',
};

const isLocal = (r: RouteSpec, name: string) => r.target.kind === 'local' && r.target.name === name;

function clean(schema: Json): Json {
  const { $schema: _s, $id: _i, ...rest } = schema;
  return rest;
}

/**
 * The OpenAPI 3.1 document of the public API, generated from the route
 * table and the zod schemas that validate requests (JSON Schema 2020-12
 * is OpenAPI 3.1's schema dialect). Built once at start.
 */
export function openApiDocument(routes: RouteSpec[], info: { version: string }): Json {
  const all = z.toJSONSchema(registry, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any', uri: REF }) as { schemas: Record<string, Json> };
  const schemas: Record<string, Json> = {};
  for (const [id, s] of Object.entries(all.schemas)) schemas[id] = clean(s);
  schemas.Error ??= { type: 'object' };

  const refOf = (schema: z.ZodType): Json => {
    const id = registry.get(schema)?.id;
    if (id) return { $ref: REF(id) };
    return clean(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json);
  };
  /** The properties of an object schema, as OpenAPI parameters. */
  const parameters = (schema: z.ZodObject | undefined, where: 'path' | 'query'): Json[] => {
    if (!schema) return [];
    const id = registry.get(schema)?.id;
    const js = id ? schemas[id]! : clean(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json);
    const props = (js.properties ?? {}) as Record<string, Json>;
    const required = new Set((js.required ?? []) as string[]);
    return Object.entries(props).map(([name, p]) => {
      const { description, ...rest } = p;
      return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
    });
  };
  const errorResponse = (status: number) => ({ description: ERRORS[status] ?? 'Error.', content: { 'application/json': { schema: { $ref: REF('Error') } } } });

  const paths: Record<string, Record<string, Json>> = {};
  for (const r of routes) {
    const responses: Record<string, Json> = {};
    const ok: Json = { description: r.ok.status === 101 ? 'Switching protocols to WebSocket.' : r.summary };
    if (r.ok.headers) ok.headers = Object.fromEntries(Object.entries(r.ok.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));
    if (r.ok.sse) {
      ok.content = {
        'text/event-stream': {
          schema: { type: 'string', description: 'Server-sent events; each `data:` line is one JSON frame.' },
          itemSchema: refOf(r.ok.sse),
        },
      };
    } else if (r.ok.schema) {
      const s = refOf(r.ok.schema);
      ok.content = { 'application/json': { schema: r.ok.array ? { type: 'array', items: s } : s } };
    } else if (isLocal(r, 'openapi')) {
      ok.content = { 'application/json': { schema: { type: 'object' } } };
    }
    responses[String(r.ok.status)] = ok;
    const statuses = new Set<number>([400, 404, 500]);
    if (r.access !== 'open') statuses.add(401);
    if (r.access === 'write') statuses.add(403);
    if (r.body) {
      statuses.add(413);
      statuses.add(415);
    }
    if (r.target.kind === 'forward' || isLocal(r, 'runStream')) statuses.add(503);
    for (const e of r.errors ?? []) statuses.add(e);
    for (const st of [...statuses].sort()) responses[String(st)] = errorResponse(st);

    const op: Json = {
      operationId: `${r.method}${toOpenApiPath(r.path).replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      summary: r.summary,
      tags: [r.tag],
      security: r.access === 'open' ? [] : r.access === 'admin' ? [{ adminToken: [] }] : [{ apiKey: [] }],
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses,
    };
    if (isLocal(r, 'runStream')) {
      (op.parameters as Json[]).push({ name: 'Last-Event-ID', in: 'header', required: false, description: 'Seq last seen; the stream resumes after the larger of it and `from`.', schema: { type: 'string' } });
    }
    if (r.idempotencyKey) {
      (op.parameters as Json[]).push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: `Up to 200 visible ASCII characters, of your choosing. ${r.idempotencyKey}`,
        schema: { type: 'string', minLength: 1, maxLength: 200 },
      });
    }
    if (r.access === 'read' || r.access === 'write') {
      (op.parameters as Json[]).push({ name: 'X-Service-Actor', in: 'header', required: false, description: 'With a console key: the person acting (audit actor, approval decider).', schema: { type: 'string' } });
    }
    if (r.body) op.requestBody = { required: r.body.required, content: { 'application/json': { schema: refOf(r.body.schema) } } };
    (paths[toOpenApiPath(r.path)] ??= {})[r.method] = op;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Durable workflow service API',
      version: info.version,
      description:
        'Every path is relative to /v1. Errors are JSON: { "error": { "code", "message" } }, every 4xx and 5xx. ' +
        `A request body is JSON in UTF-8, at most 1 MiB after its Content-Encoding (gzip, deflate or br) is undone, nested at most ${MAX_JSON_DEPTH} levels ` +
        '(the body itself is level 1), with no lone surrogate or U+0000 in any string or key.',
    },
    servers: [{ url: '/v1' }],
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ apiKey: [] }],
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'API key: sk_ (secret), pk_ (public: reads only) or ck_ (console).' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'SERVICE_ADMIN_TOKEN.' },
      },
    },
  };
}
