import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { seededRandom } from '@dws/testing';
import { request } from 'undici';
import { api, eventually, runReached } from '../src/api.js';
import { startDeployment, type Deployment, type Mode } from '../src/deployment.js';
import { startRunner, type TestRunner } from '../src/runner.js';

/*
 * Seeded fuzzing of the public API (issue 11: bad input never gets a 5xx).
 * The routes come from the OpenAPI document the gateway serves (generated
 * from its route table), so a new route is fuzzed without touching this file.
 * Every request is generated up front from FUZZ_SEED, so a failure names a
 * seed and a request that reproduce it. Fails on any 5xx, any 4xx without
 * the CONTRACT error body, a leaked stack trace, a transport error, and a
 * deployment that no longer serves (/readyz, and a run end to end) afterwards.
 *
 *   FUZZ_SEED=123 FUZZ_REQUESTS=20000 pnpm test test-e2e/test/gateway-fuzz.e2e.test.ts
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20240601);
/** HTTP requests per deployment, spread evenly over the routes (Connect handshakes come on top). */
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3000);
const HANDSHAKES = Math.max(50, Math.round(REQUESTS / 15));
/** The fleet runs on real Postgres and NATS across six processes, where the issue's 500s were found; FUZZ_MODES=embedded skips it. */
const MODES = (process.env.FUZZ_MODES ?? 'embedded,fleet').split(',') as Mode[];
/** The depth bound the gateway enforces (libs/http MAX_JSON_DEPTH, said in the README and the OpenAPI document). */
const DEPTH = 64;
const ADMIN = `admin-${randomBytes(8).toString('hex')}`;

/** A seeded PRNG with the picks the generators use. */
function prng(seed: number) {
  const next = seededRandom(seed);
  return { next, pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!, int: (n: number) => Math.floor(next() * n) };
}
type Rng = ReturnType<typeof prng>;

const nest = (depth: number, open = '[', close = ']', inner = '') => open.repeat(depth) + inner + close.repeat(depth);
const bytes = (r: Rng, n: number) => Buffer.from(Array.from({ length: n }, () => r.int(256)));

const ODD_IDS = ['', '%00', '%E0%A4%A', '%ED%A0%80', '..%2F..%2Fetc%2Fpasswd', 'x'.repeat(5000), '%F0%9F%92%A9', 'run_', '*', '%3E', 'a.b.c', 'null', '0', '-1', '%20', "'%3B drop table runs--", '%25', '%2e%2e', '%C0%80'];
const ODD_QUERY = ['', '-1', '0', '1e309', 'NaN', 'Infinity', '9'.repeat(40), '1.5', 'true', '%', '%%', '%zz', '%00', '%ED%A0%80', '%C0%AF', '%F0%9F%98%80', 'x'.repeat(3000), '[]', '{}', 'null', '2024-13-45T99:99:99Z', "'+or+1%3D1+--", '__proto__'];
const ODD_PARAMS = ['limit', 'cursor', 'sort', 'dir', 'status', 'from', 'since', 'until', 'q', 'app', 'name', 'runType', 'workflow', 'eventId', 'replayOf', 'action', 'runId', '__proto__', 'constructor', 'limit[]', 'a[b]', '%00', '%ED%A0%80'];

/** JSON texts for one field, in three kinds drawn equally often: nesting around the bound and far past it, invalid Unicode, and odd values of every type. */
const ODD_JSON: ((r: Rng) => string)[][] = [
  [
    () => nest(DEPTH - 1),
    () => nest(DEPTH),
    () => nest(DEPTH + 1),
    () => nest(10_000),
    (r) => nest(DEPTH - 2 + r.int(4), '{"a":', '}', '1'),
    () => nest(10_000, '{"a":', '}', '1'),
    (r) => nest(2000 + r.int(50_000), '[{"a":', '}]', 'null'),
  ],
  [
    () => '"\\ud800"',
    () => '"a\\udc00b"',
    () => '"\\ude00\\ud83d"',
    () => '"\\u0000"',
    () => '{"\\ud800":1}',
    () => '{"ok":{"\\u0000":[1]}}',
    () => '["fine","\\udbff"]',
    () => '"\\ud83d\\ude00 a pair is fine"',
    () => '"😀"',
  ],
  [
    () => '1e309',
    () => '-0',
    () => '123456789012345678901234567890',
    () => '0.1e-400',
    () => 'true',
    () => 'null',
    () => '[]',
    () => '{}',
    () => '""',
    () => '"   "',
    (r) => JSON.stringify('x'.repeat(250 + r.int(20))),
    () => JSON.stringify('y'.repeat(70_000)),
    () => `[${Array.from({ length: 2000 }, (_, i) => i).join(',')}]`,
    () => '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}',
    () => '"2024-13-45T99:99:99Z"',
    () => '"fuzz.go"',
    () => '"*"',
  ],
];
const oddJson = (r: Rng): string => r.pick(r.pick(ODD_JSON))(r);

interface Op {
  method: string;
  path: string;
  /** The request body's JSON Schema (refs resolved), when the route takes one. */
  body?: Json;
}
type Json = Record<string, unknown>;

/** A plausible value for a schema, so the other fields pass and the odd one reaches the service. */
function plausible(r: Rng, s: Json | undefined, doc: Json): string {
  const schema = deref(s, doc);
  if (Array.isArray(schema.enum)) return JSON.stringify(r.pick(schema.enum as unknown[]));
  if (Array.isArray(schema.anyOf)) return plausible(r, r.pick(schema.anyOf as Json[]), doc);
  switch (schema.type) {
    case 'string':
      return JSON.stringify(schema.format === 'date-time' ? new Date(Date.now() - r.int(1e9)).toISOString() : r.pick(['fuzz.go', 'fuzzed', 'default', 'x', 'a.b']));
    case 'integer':
    case 'number':
      return String(r.pick([1, 2, 100]));
    case 'boolean':
      return r.pick(['true', 'false']);
    case 'array':
      return `[${r.next() < 0.5 ? '' : plausible(r, schema.items as Json, doc)}]`;
    case 'object':
      return objectBody(r, schema, doc, 0.15);
    default:
      return r.pick(['{}', '1', '"x"', 'null']);
  }
}

function deref(s: Json | undefined, doc: Json): Json {
  const ref = s?.$ref;
  if (typeof ref !== 'string') return s ?? {};
  const name = ref.split('/').pop()!;
  return ((doc.components as Json).schemas as Record<string, Json>)[name] ?? {};
}

/** An object with the schema's properties, each plausible or (with `oddness`) odd, sometimes with an extra odd field. */
function objectBody(r: Rng, schema: Json, doc: Json, oddness: number): string {
  const props = Object.entries((schema.properties ?? {}) as Record<string, Json>);
  const fields = props.filter(() => r.next() < 0.8).map(([k, p]) => `${JSON.stringify(k)}:${r.next() < oddness ? oddJson(r) : plausible(r, p, doc)}`);
  if (r.next() < 0.2) fields.push(`${r.pick(['"extra"', '"\\ud800"', '"\\u0000"', '"__proto__"'])}:${oddJson(r)}`);
  return `{${fields.join(',')}}`;
}

/** The body of one request: schema-shaped with odd fields, or raw garbage; sometimes content-encoded, well or badly. */
function oddBody(r: Rng, op: Op, doc: Json): { raw: string | Buffer; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const schema = deref(op.body, doc);
  const shaped = () => {
    const variants = Array.isArray(schema.anyOf) ? (schema.anyOf as Json[]).map((v) => deref(v, doc)) : [schema];
    const v = r.pick(variants);
    if (v.type === 'array') return `[${Array.from({ length: 1 + r.int(3) }, () => objectBody(r, deref(v.items as Json, doc), doc, 0.5)).join(',')}]`;
    return objectBody(r, v, doc, 0.5);
  };
  let text: string | Buffer = r.pick<() => string | Buffer>([
    shaped,
    shaped,
    shaped,
    shaped,
    () => oddJson(r),
    () => '{',
    () => 'nul',
    () => '{"a":1}}',
    () => `\ufeff${shaped()}`,
    () => bytes(r, r.int(2000)),
    () => Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xed, 0xa0, 0x80]), Buffer.from('"}')]),
    () => `{"name":"big","data":${JSON.stringify('x'.repeat(1024 * 1024))}}`,
    () => nest(100_000 + r.int(400_000)),
  ])();
  const enc = r.next();
  if (enc < 0.06) [text, headers['content-encoding']] = [gzipSync(text), r.pick(['gzip', 'GZIP', 'x-gzip'])];
  else if (enc < 0.09) [text, headers['content-encoding']] = [deflateSync(text), 'deflate'];
  else if (enc < 0.11) [text, headers['content-encoding']] = [brotliCompressSync(text), 'br'];
  else if (enc < 0.2) headers['content-encoding'] = r.pick(['gzip', 'deflate', 'br', 'gzip, br', 'compress', 'nope', 'identity', '']);
  else if (enc < 0.25) [text, headers['content-encoding']] = [gzipSync(nest(200_000)), 'gzip'];
  if (r.next() < 0.08) headers['content-type'] = r.pick(['text/plain; charset=ebcdic', 'application/json; charset=utf-16', 'multipart/form-data; boundary=x', '']);
  return { raw: text, headers };
}

function oddHeaders(r: Rng, key: string, keys: string[]): Record<string, string> {
  // Mostly the right key, so most requests get past auth to the validation and the services behind it.
  if (r.next() < 0.6) return { authorization: `Bearer ${key}` };
  const h: Record<string, string> = r.pick<Record<string, string>>([
    { authorization: `Bearer ${r.pick(keys)}` },
    { authorization: `Bearer ${key}`, 'x-service-actor': r.pick(['x'.repeat(5000), 'ÿþ', ' ']) },
    // Header values must be visible ASCII or latin-1 (a client refuses anything else).
    { authorization: `Bearer ${key}`, 'last-event-id': r.pick(['-1', '1e309', 'x', '9'.repeat(40), '0']) },
    { authorization: `Bearer ${key} extra` },
    { authorization: `Bearer ${'k'.repeat(4000)}` },
    { authorization: 'Basic Zm9vOmJhcg==' },
    { authorization: `bearer\t${key}` },
    { authorization: `Bearer ${key}`, 'x-request-id': 'r'.repeat(500) },
    { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    {},
  ]);
  return { ...h };
}

interface HttpCase {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

/** Every request of a run, generated up front from the seed. */
function httpCases(r: Rng, base: string, ops: Op[], doc: Json, dep: Deployment, real: { runs: string[]; events: string[] }): HttpCase[] {
  const perOp = Math.ceil(REQUESTS / ops.length);
  const keys = [dep.secretKey, dep.publicKey, ADMIN];
  const cases: HttpCase[] = [];
  for (const op of ops) {
    const key = op.path.startsWith('/admin') ? ADMIN : r.pick([dep.secretKey, dep.secretKey, dep.publicKey]);
    for (let i = 0; i < perOp; i++) {
      const path = op.path.replace(/\{[^}]+\}/g, () => {
        const x = r.next();
        // A real id of the path's kind (one of another kind is a fresh-looking id: a run read waits for it briefly, as it should).
        const own = op.path.startsWith('/runs') ? real.runs : op.path.startsWith('/events') ? real.events : [...real.runs, ...real.events];
        return x < 0.45 ? r.pick(ODD_IDS) : x < 0.9 ? r.pick(own) : x < 0.92 ? r.pick([...real.runs, ...real.events]) : `run_${randomBytes(4).toString('hex')}`;
      });
      const qs: string[] = [];
      for (let q = r.int(4); q > 0; q--) qs.push(`${r.pick(ODD_PARAMS)}=${r.pick(ODD_QUERY)}`);
      if (r.next() < 0.2) qs.push(r.pick(['limit=1&limit=2', '%zz=1', '=&=&', 'q=%', 'a=%E0%A4%A', '&&&', 'sort', 'app=%00', 'name=%ED%A0%80']));
      const headers = oddHeaders(r, key, keys);
      let body: string | Buffer | undefined;
      if (op.method !== 'GET' ? r.next() < 0.85 : r.next() < 0.03) {
        const b = oddBody(r, op, doc);
        body = b.raw;
        Object.assign(headers, b.headers);
      }
      cases.push({ method: op.method, url: `${base}/v1${path}${qs.length ? `?${qs.join('&')}` : ''}`, headers, body });
    }
  }
  return cases;
}

/** What is wrong with an answer, or undefined: no 5xx, the error body on every 4xx, no stack trace. */
function judge(status: number, text: string): string | undefined {
  if (status >= 500) return `status ${status}`;
  if (status < 400) return undefined;
  if (/\bat .+:\d+:\d+|node_modules|Error: /.test(text)) return 'stack trace in the body';
  try {
    const e = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof e.error?.code === 'string' && /^[a-z][a-z0-9_]*$/.test(e.error.code) && typeof e.error.message === 'string') return undefined;
  } catch {
    /* judged below */
  }
  return 'no CONTRACT error body (snake_case code and message)';
}

async function send(c: HttpCase): Promise<{ status: number; text: string }> {
  const ac = new AbortController();
  const res = await request(c.url, { method: c.method as 'GET', headers: c.headers, body: c.body, signal: ac.signal, headersTimeout: 30_000 });
  if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
    ac.abort(); // a stream opened: fine, drop it
    await res.body.text().catch(() => undefined);
    return { status: res.statusCode, text: '' };
  }
  return { status: res.statusCode, text: await res.body.text() };
}

/** A raw HTTP exchange on a fresh socket: the answer's status line, headers and body, as text. */
function rawExchange(port: number, text: string | Buffer, timeoutMs = 10_000): Promise<string> {
  return new Promise<string>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(text));
    let out = '';
    s.setTimeout(timeoutMs, () => s.destroy());
    s.on('data', (b) => {
      out += b.toString('latin1');
      // A 101, or an answer on a kept-alive socket, leaves it open: stop once the answer is whole.
      const end = out.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(out.slice(0, end));
      if (/^HTTP\/1\.1 101 /.test(out) || (length && Buffer.byteLength(out.slice(end + 4), 'latin1') >= Number(length[1]))) s.destroy();
    });
    s.on('close', () => resolve(out));
    s.on('error', () => resolve(out));
  });
}

/** Parse a raw HTTP answer into status and body (content-length delimited or to the close). */
function parseRaw(out: string): { status: number; body: string } | undefined {
  const m = /^HTTP\/1\.1 (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(out);
  return m ? { status: Number(m[1]), body: Buffer.from(m[3]!, 'latin1').toString('utf8') } : undefined;
}

/** GET /v1/connect handshakes, well and badly formed. */
function handshakeCases(r: Rng, dep: Deployment): string[] {
  const goodKey = () => randomBytes(16).toString('base64');
  return Array.from({ length: HANDSHAKES }, () => {
    const method = r.next() < 0.8 ? 'GET' : r.pick(['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'BREW']);
    const lines = [`${method} ${r.next() < 0.9 ? '/v1/connect' : r.pick(['/v1/connect/x', '/v1/runs', '/'])} HTTP/1.1`, 'Host: fuzz'];
    const add = (p: number, line: () => string) => r.next() < p && lines.push(line());
    add(0.95, () => `Connection: ${r.pick(['Upgrade', 'upgrade', 'keep-alive, Upgrade'])}`);
    add(0.95, () => `Upgrade: ${r.pick(['websocket', 'websocket', 'WebSocket', 'h2c', 'websocket2', ''])}`);
    add(0.9, () => `Sec-WebSocket-Key: ${r.pick([goodKey(), goodKey(), 'bad', '', 'x'.repeat(24), `${goodKey()}x`, '!!!!!!!!!!!!!!!!!!!!!!=='])}`);
    add(0.9, () => `Sec-WebSocket-Version: ${r.pick(['13', '13', '8', '7', '14', 'abc', ''])}`);
    add(0.9, () => `Sec-WebSocket-Protocol: ${r.pick(['service.connect.v0', 'service.connect.v0', 'chat', 'chat, service.connect.v0', 'service.connect.v0, service.connect.v0', '@@', ''])}`);
    add(0.9, () => `Authorization: ${r.pick([`Bearer ${dep.secretKey}`, `Bearer ${dep.secretKey}`, `Bearer ${dep.publicKey}`, 'Bearer sk_nope', 'Basic eA=='])}`);
    if (method !== 'GET' && r.next() < 0.5) lines.push('Content-Length: 2', '', '{}');
    else lines.push('', '');
    return lines.join('\r\n');
  });
}

describe.each(MODES)('gateway fuzz (%s)', (mode) => {
  let dep: Deployment;
  let runner: TestRunner;
  let doc: Json;
  let ops: Op[];
  /** Real run and event ids, so malformed input also reaches the services' deeper paths. */
  const real = { runs: [] as string[], events: [] as string[] };

  const runToSuccess = async (i: number) => {
    const ev = await eventually('a run', async () => {
      const r = await api(dep.base, 'POST', '/v1/events', { key: dep.secretKey, body: { name: 'fuzz.go', data: { i } } });
      return r.body.triggered?.[0] ? r.body : undefined;
    });
    const runId = (ev.triggered[0] as { runId: string }).runId;
    await eventually('the run succeeded', async () => runReached((await api(dep.base, 'GET', `/v1/runs/${runId}`, { key: dep.secretKey })).body));
    return { runId, eventId: ev.id as string };
  };

  beforeAll(async () => {
    dep = await startDeployment(mode, { env: { SERVICE_ADMIN_TOKEN: ADMIN } });
    runner = await startRunner(dep, (r) => {
      r.workflow('fuzzed', { triggers: [{ event: 'fuzz.go' }] }, async ({ step }) => ({ a: await step.run('a', () => 1), b: await step.run('b', () => 2) }));
    });
    for (let i = 0; i < 3; i++) {
      const { runId, eventId } = await runToSuccess(i);
      real.runs.push(runId);
      real.events.push(eventId);
    }
    doc = (await api(dep.base, 'GET', '/v1/openapi.json')).body as Json;
    ops = Object.entries(doc.paths as Record<string, Record<string, Json>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        body: ((op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json']?.schema as Json | undefined,
      })),
    );
    expect(ops.length).toBeGreaterThan(20);
  }, 180_000);
  afterAll(async () => {
    await runner?.close();
    await dep?.stop();
  }, 60_000);

  it('refuses the inputs issue 11 found with 4xx and our codes', async () => {
    const post = (path: string, raw: string | Buffer, headers: Record<string, string> = {}) =>
      send({ method: 'POST', url: `${dep.base}/v1${path}`, headers: { authorization: `Bearer ${dep.secretKey}`, 'content-type': 'application/json', ...headers }, body: raw });
    const code = (res: { status: number; text: string }) => ({ status: res.status, code: (JSON.parse(res.text) as { error?: { code: string } }).error?.code });
    const deepData = `{"name":"fuzz.go","data":${nest(10_000)}}`;
    expect(code(await post('/events', deepData))).toEqual({ status: 400, code: 'json_too_deep' });
    expect(code(await post('/events', `{"name":"x","data":${nest(10_000, '{"a":', '}', '1')}}`))).toEqual({ status: 400, code: 'json_too_deep' });
    expect(code(await post(`/runs/${real.runs[0]}/replay`, `{"input":${nest(10_000)}}`))).toEqual({ status: 400, code: 'json_too_deep' });
    expect(code(await post('/events', '{"name":"\\ud800"}'))).toEqual({ status: 400, code: 'invalid_unicode' });
    expect(code(await post('/events', '[{"name":"ok","data":{"k":"\\udc00"}}]'))).toEqual({ status: 400, code: 'invalid_unicode' });
    expect(code(await post('/events', '{"name":"ok","data":"\\u0000"}'))).toEqual({ status: 400, code: 'invalid_unicode' });
    expect(code(await post('/events', Buffer.from([0x7b, 0xff, 0x7d])))).toEqual({ status: 400, code: 'invalid_unicode' });
    expect(code(await post('/events', '{"a":1}', { 'content-encoding': 'gzip' }))).toEqual({ status: 400, code: 'invalid_body_encoding' });
    expect(code(await post('/events', '{"a":1}', { 'content-encoding': 'nope' }))).toEqual({ status: 415, code: 'unsupported_encoding' });
    expect(code(await post('/events', gzipSync(deepData), { 'content-encoding': 'gzip' }))).toEqual({ status: 400, code: 'json_too_deep' });
    // At the bound is accepted, and a good gzip body is read.
    expect((await post('/events', gzipSync(`{"name":"fuzz.edge","data":${nest(DEPTH - 1)}}`), { 'content-encoding': 'gzip' })).status).toBe(202);
    const q = await send({ method: 'GET', url: `${dep.base}/v1/runs?app=%00`, headers: { authorization: `Bearer ${dep.secretKey}` } });
    expect(code(q)).toEqual({ status: 400, code: 'invalid_unicode' });

    const port = Number(new URL(dep.base).port);
    const hs = (extra: string, method = 'GET') =>
      rawExchange(port, `${method} /v1/connect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${dep.secretKey}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${extra}\r\n`).then((o) => {
        const p = parseRaw(o);
        return p && { status: p.status, code: (JSON.parse(p.body) as { error: { code: string } }).error.code };
      });
    const key = `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n`;
    const proto = 'Sec-WebSocket-Protocol: service.connect.v0\r\n';
    expect(await hs(`Sec-WebSocket-Key: bad\r\nSec-WebSocket-Version: 13\r\n${proto}`)).toEqual({ status: 400, code: 'invalid_websocket_key' });
    expect(await hs(`${key}Sec-WebSocket-Version: 7\r\n${proto}`)).toEqual({ status: 426, code: 'unsupported_websocket_version' });
    expect(await hs(`${key}Sec-WebSocket-Version: 13\r\n${proto}`, 'POST')).toEqual({ status: 405, code: 'method_not_allowed' });
  }, 60_000);

  it(`survives malformed requests to every route and Connect handshakes (seed ${SEED})`, async () => {
    const r = prng(SEED);
    const cases = httpCases(r, dep.base, ops, doc, dep, real);
    const handshakes = handshakeCases(r, dep);
    console.log(`gateway fuzz (${mode}): seed ${SEED}, ${cases.length} requests over ${ops.length} routes, ${handshakes.length} Connect handshakes; FUZZ_SEED=<n> to change`);
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    const t0 = Date.now();
    // Six in flight: the brief waits (a fresh run id's read-your-writes) overlap, and a 2-core CI box keeps up.
    let next = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < cases.length) {
          const i = next++;
          const c = cases[i]!;
          const what = `#${i} ${c.method} ${c.url.slice(0, 200)} body=${c.body === undefined ? '-' : JSON.stringify(Buffer.from(c.body).subarray(0, 80).toString('latin1'))} headers=${JSON.stringify(c.headers).slice(0, 200)}`;
          try {
            const res = await send(c);
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
            const wrong = judge(res.status, res.text);
            if (wrong) failures.push(`${wrong}: ${what} -> ${res.status} ${res.text.slice(0, 200)}`);
          } catch (err) {
            failures.push(`transport: ${what}: ${(err as Error).message}`);
          }
        }
      }),
    );
    const port = Number(new URL(dep.base).port);
    for (const [i, h] of handshakes.entries()) {
      const out = await rawExchange(port, h);
      const p = parseRaw(out);
      const wrong = p ? judge(p.status, p.body) : `no HTTP answer (${JSON.stringify(out.slice(0, 80))})`;
      if (p) statuses.set(p.status, (statuses.get(p.status) ?? 0) + 1);
      if (wrong) failures.push(`${wrong}: handshake #${i} ${JSON.stringify(h.slice(0, 400))} -> ${out.slice(0, 300)}`);
    }
    console.log(`gateway fuzz (${mode}): ${Date.now() - t0} ms, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
    expect({ failed: failures.length, first: failures.slice(0, 30) }).toEqual({ failed: 0, first: [] });

    // Still alive and serving: ready, every process up, and a run goes end to end.
    expect((await api(dep.base, 'GET', '/readyz')).status).toBe(200);
    for (const pid of dep.pids?.() ?? []) expect(() => process.kill(pid, 0)).not.toThrow();
    await runToSuccess(99);
  }, 600_000);

  it('answers garbage on the wire with a JSON 400 and keeps serving', async () => {
    const port = Number(new URL(dep.base).port);
    const cases = [
      'GET /v1/runs HTTP/9.9\r\n\r\n',
      'BREW /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n',
      'POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzzzzz',
      'POST /v1/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n',
      `GET /v1/runs HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(100_000)}\r\n\r\n`,
      'GET /v1/runs HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      'GET /v1/runs HTTP/1.1\r\nHost: x\r\nX-Service-Actor: a\u0000b\r\n\r\n',
      '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03',
    ];
    for (const c of cases) {
      const out = await rawExchange(port, c, 5000);
      if (out === '') continue; // the parser may just hang up on bytes that are not HTTP at all
      expect({ c: c.slice(0, 40), status: out.slice(0, 12) }).toEqual({ c: c.slice(0, 40), status: expect.stringMatching(/^HTTP\/1\.1 4\d\d/) });
      expect(out).toMatch(/"error":\{"code":"[a-z_]+"/);
    }
    expect((await api(dep.base, 'GET', '/readyz')).status).toBe(200);
  }, 60_000);
});
