/**
 * A local stand-in for Anthropic's Messages API (POST /v1/messages, the shape
 * of its public docs), deterministic so the demo needs no key and no network:
 * it looks the order up, proposes a full refund, then replies; as a judge it
 * answers a score.
 *
 *   pnpm --filter @dws/example-agent-ai fake-model    # listens on FAKE_MODEL_PORT (default 8399)
 */
import { createServer, type Server } from 'node:http';

interface Msg {
  role: string;
  content: string;
}

function answer(system: string, messages: Msg[]): string {
  if (system.startsWith('Rate')) return '0.9';
  const last = messages[messages.length - 1]!.content;
  const orderId = /order (\S+?):/.exec(messages[0]!.content)?.[1] ?? 'o-1';
  if (messages.length === 1) return JSON.stringify({ tool: 'lookup_order', args: { orderId }, why: 'See what was ordered.' });
  if (last.startsWith('Result of lookup_order')) {
    const total = (JSON.parse(last.slice(last.indexOf('{'))) as { total: number }).total;
    return JSON.stringify({ tool: 'issue_refund', args: { orderId, amount: total }, why: 'The tea arrived cold: refund it in full.' });
  }
  if (last.startsWith('Result of issue_refund')) {
    const refunded = (JSON.parse(last.slice(last.indexOf('{'))) as { refunded: number }).refunded;
    return JSON.stringify({ reply: `Sorry about the cold tea: we refunded ${refunded} to your card.` });
  }
  return JSON.stringify({ reply: 'Sorry, a colleague will follow up on your ticket.' });
}

export function startFakeModel(port: number): Promise<Server> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/messages') return void res.writeHead(404).end();
      const body = JSON.parse(raw) as { model: string; system?: string; messages: Msg[] };
      const text = answer(body.system ?? '', body.messages);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: `msg_${Date.now()}`,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text }],
          stop_reason: 'end_turn',
          usage: { input_tokens: JSON.stringify(body.messages).length >> 2, output_tokens: text.length >> 2 },
        }),
      );
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.env.FAKE_MODEL_PORT ?? 8399);
  await startFakeModel(port);
  process.stdout.write(`fake model (Anthropic Messages API) on http://127.0.0.1:${port}\n`);
}
