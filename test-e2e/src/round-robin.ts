import net from 'node:net';

export interface RoundRobin {
  /** `http://127.0.0.1:<port>`: the one address in front of the targets. */
  url: string;
  /** The ports connections go to, in turn; set once the targets listen. */
  targets: number[];
  /** Connections sent to each target so far, by index. */
  connections: number[];
  close(): Promise<void>;
}

/**
 * A TCP front that hands each connection to the next target in turn:
 * replicas behind one address, as compose's service name or a Kubernetes
 * Service puts them.
 */
export async function startRoundRobin(): Promise<RoundRobin> {
  const sockets = new Set<net.Socket>();
  const rr: RoundRobin = { url: '', targets: [], connections: [], close: async () => {} };
  let next = 0;
  const server = net.createServer((client) => {
    if (rr.targets.length === 0) return void client.destroy();
    const i = next++ % rr.targets.length;
    rr.connections[i] = (rr.connections[i] ?? 0) + 1;
    const upstream = net.connect(rr.targets[i]!, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => (client.destroy(), upstream.destroy()));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  rr.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  rr.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  return rr;
}
