import WebSocket from 'ws';
import { writesPerTurn } from '@dws/protocol';

/** The socket could not carry a checkpoint (not opened, closed, or no answer in time): send it another way. */
export class SocketUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SocketUnavailable';
  }
}

interface Waiting {
  resolve: (stored: boolean) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * One WebSocket to a scheduler replica's checkpoint endpoint
 * (`ctx.checkpointSocket`), shared by every pass of this process that
 * replica drives: a checkpoint is one frame each way instead of an HTTP
 * exchange. Frames carry an id; answers may come in any order.
 */
class CheckpointConnection {
  private readonly ws: WebSocket;
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  /** The checkpoints of every run that one read of answers let go on leave in one write. */
  private beforeSend = () => {};
  readonly opened: Promise<void>;
  closed = false;

  constructor(
    url: string,
    private readonly answerTimeoutMs: number,
    connectTimeoutMs: number,
    onClose: () => void,
  ) {
    this.ws = new WebSocket(url, { handshakeTimeout: connectTimeoutMs, perMessageDeflate: false });
    // Idle, it must not keep the runner's process alive (a serve() server or a Connect socket does that).
    this.ws.once('upgrade', (res) => {
      res.socket.unref();
      this.beforeSend = writesPerTurn(res.socket);
    });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', (err) => reject(new SocketUnavailable(`checkpoint socket ${url}: ${err.message}`)));
    });
    // Awaited by send(); a failed open is handled there.
    this.opened.catch(() => undefined);
    this.ws.on('error', () => undefined);
    this.ws.on('message', (data) => {
      let answer: { id?: unknown; status?: unknown };
      try {
        answer = JSON.parse(data.toString()) as typeof answer;
      } catch {
        return;
      }
      const w = typeof answer.id === 'number' ? this.waiting.get(answer.id) : undefined;
      if (!w) return;
      this.settle(answer.id as number);
      // Anything but 200 ends the pass, like the HTTP route's answer.
      w.resolve(answer.status === 200);
    });
    this.ws.on('close', () => {
      this.closed = true;
      onClose();
      for (const [id, w] of [...this.waiting]) {
        this.settle(id);
        w.reject(new SocketUnavailable('checkpoint socket closed'));
      }
    });
  }

  /** True once stored, false when refused; SocketUnavailable when this socket could not say. */
  async send(runId: string, body: string): Promise<boolean> {
    await this.opened;
    if (this.ws.readyState !== WebSocket.OPEN) throw new SocketUnavailable('checkpoint socket closed');
    const id = this.nextId++;
    return new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(id);
        reject(new SocketUnavailable(`no answer to a checkpoint within ${this.answerTimeoutMs} ms`));
      }, this.answerTimeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
      // `body` is the JSON object {token, opcodes, logs}: the frame is it with the id and run id in front.
      this.beforeSend();
      this.ws.send(`{"id":${id},"runId":${JSON.stringify(runId)},${body.slice(1)}`);
    });
  }

  private settle(id: number): void {
    clearTimeout(this.waiting.get(id)?.timer);
    this.waiting.delete(id);
  }

  close(): void {
    this.ws.terminate();
  }
}

/** The process's checkpoint sockets, one per replica URL, opened on first use and again after a close. */
export class CheckpointSockets {
  private readonly open = new Map<string, CheckpointConnection>();

  constructor(private readonly o: { answerTimeoutMs: number; connectTimeoutMs: number }) {}

  /** @throws SocketUnavailable when the socket cannot carry it (the caller sends it over HTTP) */
  send(url: string, runId: string, body: string): Promise<boolean> {
    let conn = this.open.get(url);
    if (!conn || conn.closed) {
      const c = new CheckpointConnection(url, this.o.answerTimeoutMs, this.o.connectTimeoutMs, () => {
        if (this.open.get(url) === c) this.open.delete(url);
      });
      this.open.set(url, c);
      conn = c;
    }
    return conn.send(runId, body);
  }

  close(): void {
    for (const c of this.open.values()) c.close();
    this.open.clear();
  }
}
