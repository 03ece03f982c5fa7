/** The part of a net.Socket this needs (typed structurally: the SDK runs anywhere Node does). */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Frames written to `socket` during one event-loop turn leave in one write:
 * call the result before each send. The first send of a turn corks the
 * socket and the check phase (setImmediate, after the turn's I/O callbacks)
 * uncorks it. A checkpoint socket carries many runs: the answers one group
 * commit releases, or the checkpoints those answers let the runs send next,
 * would otherwise cost a syscall and a wake-up of the peer each.
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
    setImmediate(uncork);
  };
}
