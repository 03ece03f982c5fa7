import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeModelCall {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/**
 * A local model provider on 127.0.0.1 for the AI tests (no network here):
 * every JSON POST is recorded and answered 200 with what `answer` returns
 * (or resolves to: a test may hold a call), shaped by the test as the
 * provider's API reference shows.
 */
export async function startFakeModel(answer: (call: FakeModelCall) => unknown | Promise<unknown>): Promise<{ url: string; calls: FakeModelCall[]; close(): Promise<void> }> {
  const calls: FakeModelCall[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', async () => {
      const call = { path: req.url ?? '', headers: req.headers, body: raw ? JSON.parse(raw) : undefined };
      calls.push(call);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(await answer(call)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** An Anthropic Messages API answer with `text` and the given token counts. */
export const anthropicMessage = (model: string, text: string, usage = { input_tokens: 1, output_tokens: 1 }) => ({
  type: 'message',
  role: 'assistant',
  model,
  content: [{ type: 'text', text }],
  usage,
});
