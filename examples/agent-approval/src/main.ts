import { runner } from './workflows.js';

// Dials the service over a WebSocket (Connect): no inbound port needed.
const conn = runner.connect({ onStateChange: (s, d) => process.stdout.write(`connect: ${s}${d?.reason ? ` (${d.reason})` : ''}\n`) });
await conn.ready;
process.stdout.write(
  `support runner connected to ${runner.url}: ${runner
    .workflows()
    .map((w) => w.name)
    .join(', ')}\n`,
);
process.on('SIGINT', () => void conn.close().then(() => process.exit(0)));
