import { runner } from './workflows.js';

// Dials the service over a WebSocket (Connect): no inbound port needed.
const conn = runner.connect();
await conn.ready;
process.stdout.write(`support-ai runner connected to ${runner.url}\n`);
process.on('SIGINT', () => void conn.close().then(() => process.exit(0)));
