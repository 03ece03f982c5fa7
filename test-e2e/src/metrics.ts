/**
 * A metric's samples summed over every label set that carries `labels`,
 * read from a process's /metrics (Prometheus text; `port` on 127.0.0.1).
 */
export async function metricTotal(port: number, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split('\n')
    .filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && wanted.every((w) => l.includes(w)))
    .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}
