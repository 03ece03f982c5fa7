/**
 * A replica's due-time work (timeouts, deliveries): `work()` runs every
 * `pollMs`, and at once on `kick()` (a local write or a bus nudge made
 * something due), never twice at a time: a kick while it runs asks for one
 * more run right after, so nothing made due meanwhile waits for the next poll.
 */
export class PollLoop {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private stopped = false;
  private inflight: Promise<void> = Promise.resolve();

  constructor(
    private readonly work: () => Promise<unknown>,
    private readonly opts: {
      /** Time between polls. */
      pollMs: number;
      /** Told of a failed run (the next poll retries). */
      onError: (err: unknown) => void;
    },
  ) {}

  /** True once stop() was called: a long `work()` checks it between rounds. */
  get stopping(): boolean {
    return this.stopped;
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.kick();
      this.timer = setTimeout(tick, this.opts.pollMs);
    };
    tick();
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.inflight = this.work()
      .then(() => undefined, this.opts.onError)
      .finally(() => {
        this.running = false;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** No new run starts; resolves once the one in flight ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inflight;
  }
}
