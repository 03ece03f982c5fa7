import { runner } from './workflows.js';

// Connect (the default) dials the service over a WebSocket: no inbound port
// needed. With RUNNER_PORT set the runner serves POST /invoke instead and the
// service calls it (this needs SERVICE_SIGNING_KEY).
const port = process.env.RUNNER_PORT;
if (port) {
  const l = await runner.listen({ port: Number(port), host: '127.0.0.1' });
  process.stdout.write(`shop runner serving on :${l.port}, registered with ${runner.url}\n`);
  process.on('SIGINT', () => void l.close().then(() => process.exit(0)));
} else {
  const conn = runner.connect({ onStateChange: (s, d) => process.stdout.write(`connect: ${s}${d?.reason ? ` (${d.reason})` : ''}\n`) });
  await conn.ready;
  process.stdout.write(`shop runner connected to ${runner.url}: ${runner.workflows().map((w) => w.name).join(', ')}\n`);
  process.on('SIGINT', () => void conn.close().then(() => process.exit(0)));
}
