import { request } from 'undici';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
/** A run not heard of on the stream for this long is read directly (its frame may have been dropped). */
const READ_AFTER_MS = 3_000;

/**
 * Run ends as the workspace's run stream (GET /v1/runs/stream) reports them:
 * one connection for every run, the way a client that starts many runs and
 * needs only their outcomes follows them (and close to what Restate's client
 * gets: the call's result, no timeline). That stream is best-effort (SPEC),
 * so a run not heard of within READ_AFTER_MS is read with GET /v1/runs/{id}.
 */
export class WorkspaceRunEnds {
  private readonly waiting = new Map<string, { resolve: (status: string) => void; since: number }>();
  /** Ends heard before anyone waited for them (a run can end before its 202 is read). */
  private readonly ended = new Map<string, string>();
  private readonly sweep: NodeJS.Timeout;
  private closed = false;

  private constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly body: AsyncIterable<Buffer> & { destroy(): void },
  ) {
    void this.read();
    this.sweep = setInterval(() => void this.readLate(), 500);
  }

  /** Opens the stream; resolves once the gateway answered (it listens from then on). */
  static async open(base: string, key: string): Promise<WorkspaceRunEnds> {
    const res = await request(`${base}/v1/runs/stream`, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } });
    if (res.statusCode !== 200) throw new Error(`GET /v1/runs/stream: ${res.statusCode} ${await res.body.text()}`);
    return new WorkspaceRunEnds(base, key, res.body as never);
  }

  /** The run's terminal status. */
  wait(runId: string): Promise<string> {
    const heard = this.ended.get(runId);
    if (heard) {
      this.ended.delete(runId);
      return Promise.resolve(heard);
    }
    return new Promise((resolve) => this.waiting.set(runId, { resolve, since: Date.now() }));
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweep);
    this.body.destroy();
  }

  private end(runId: string, status: string): void {
    const w = this.waiting.get(runId);
    if (!w) {
      this.ended.set(runId, status);
      return;
    }
    this.waiting.delete(runId);
    w.resolve(status);
  }

  private async read(): Promise<void> {
    let buf = '';
    try {
      for await (const chunk of this.body) {
        buf += chunk.toString();
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const data = buf
            .slice(0, i)
            .split('\n')
            .find((l) => l.startsWith('data: '));
          buf = buf.slice(i + 2);
          if (!data) continue;
          const f = JSON.parse(data.slice(6)) as { runId?: string; status?: string };
          if (f.runId && f.status && TERMINAL.has(f.status)) this.end(f.runId, f.status);
        }
      }
    } catch (err) {
      if (!this.closed) throw err;
    }
  }

  private async readLate(): Promise<void> {
    const late = [...this.waiting].filter(([, w]) => Date.now() - w.since > READ_AFTER_MS);
    for (const [runId, w] of late) {
      w.since = Date.now();
      const res = await request(`${this.base}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${this.key}` } });
      const run = (await res.body.json()) as { status?: string };
      if (res.statusCode === 200 && run.status && TERMINAL.has(run.status)) this.end(runId, run.status);
    }
  }
}
