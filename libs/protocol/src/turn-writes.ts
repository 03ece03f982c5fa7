/** The part of a net.Socket this needs (typed structurally: the SDK runs anywhere Node does). */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Frames written to `socket` by one callback and the promise continuations
 * it sets off leave in one write: call the result before each send. The
 * first send corks the socket; a nextTick uncorks it, which Node runs once
 * the microtasks queued meanwhile have run (Node's own pattern for cork),
 * so nothing waits for the next turn of the event loop. A checkpoint socket
 * carries many runs: the answers one group commit releases, or the
 * checkpoints those answers let the runs send next, would otherwise cost a
 * syscall and a wake-up of the peer each.
 */
export function writesPerTurn(socket: Corkable): () => void {
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  return () => {
    if (corked) return;
    corked = true;
    socket.cork();
    process.nextTick(uncork);
  };
}
