/**
 * W7's SSE clients, in a process of their own (w7-streams.ts forks
 * W7_CLIENT_PROCS of these): with the runner, W2's load and 1,000 clients
 * on one event loop, the bench measured its own lag as much as the
 * gateway's (it lagged 135-290 ms itself while the streams connected).
 *
 * Protocol over the IPC channel: the child says `ready` once loaded (its
 * start is not the streams' to pay); the parent sends `open` (base, key, one run
 * id per client); the child opens every stream at once and answers `opened`
 * (statuses, its event loop's worst delay meanwhile); the parent sends
 * `allOpen` with the moment the last stream of every child was open; the
 * child waits for every stream's end and answers `report`, then exits.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sse } from '@dws/testing';

type Stream = Awaited<ReturnType<typeof sse>>;

export type ToChild = { type: 'open'; base: string; key: string; runIds: string[] } | { type: 'allOpen'; at: number };
export type FromChild =
  | { type: 'ready' }
  | ({ type: 'opened' } & Awaited<ReturnType<Clients['open']>>)
  | ({ type: 'report' } & Awaited<ReturnType<Clients['finish']>>);

/** Clients, each opened on one run id of `open`'s, then what they received. */
export interface Clients {
  open(runIds: string[]): Promise<{ statuses: number[]; loopDelayMaxMs: number }>;
  /**
   * After every stream's end (a stream that never ends is cut after 5 minutes): `ok` streams got every
   * frame once, in order, and their run's end; the lag (receive time minus the frame's ts) of frames
   * published while the streams connected and once all were open (`allOpenAt`, of every process).
   */
  finish(allOpenAt: number): Promise<{ ok: number; frames: number; connecting: number[]; steady: number[] }>;
}

/** Clients in this process. */
export function localClients(base: string, key: string): Clients {
  let streams: Stream[] = [];
  return {
    async open(runIds) {
      const loopDelay = monitorEventLoopDelay({ resolution: 5 });
      loopDelay.enable();
      streams = await Promise.all(runIds.map((runId) => sse(base, `/v1/runs/${runId}/stream`, { key })));
      loopDelay.disable();
      return { statuses: streams.map((s) => s.status), loopDelayMaxMs: Math.round(loopDelay.max / 1e6) };
    },
    async finish(allOpenAt) {
      // unref: a pending 5-minute timer per client kept the process alive for 5 minutes after the work.
      await Promise.all(streams.map((s) => Promise.race([s.ended, new Promise((r) => setTimeout(r, 300_000).unref())])));
      return report(streams, allOpenAt);
    },
  };
}

function report(streams: Stream[], allOpenAt: number): Awaited<ReturnType<Clients['finish']>> {
  let frames = 0;
  let ok = 0;
  const connecting: number[] = [];
  const steady: number[] = [];
  for (const s of streams) {
    const seqs = s.events.map((e) => Number(e.id));
    frames += seqs.length;
    // Tail lag: frames stamped after the client's stream was flowing (its first event), i.e. the live path;
    // backlog frames are old by design.
    const flowing = s.receivedAt[0] ?? Infinity;
    s.events.forEach((e, i) => {
      const ts = Date.parse((JSON.parse(e.data!) as { ts: string }).ts);
      const at = s.receivedAt[i];
      if (ts > flowing && at !== undefined) (ts > allOpenAt ? steady : connecting).push(at - ts);
    });
    const inOrder = seqs.every((q, i) => q === i + 1);
    const last = s.events[s.events.length - 1];
    const ended = last?.event === 'run_status' && /"status":"(succeeded|failed|cancelled)"/.test(last.data ?? '');
    if (inOrder && ended) ok++;
  }
  return { ok, frames, connecting, steady };
}

if (process.argv[2] === 'child' && process.send) {
  const send = (m: FromChild) => process.send!(m);
  let clients: Clients | undefined;
  process.on('message', (m: ToChild) => {
    if (m.type === 'open') {
      clients = localClients(m.base, m.key);
      void clients.open(m.runIds).then((o) => send({ type: 'opened', ...o }));
    } else {
      void clients!.finish(m.at).then((r) => {
        send({ type: 'report', ...r });
        process.disconnect();
      });
    }
  });
  send({ type: 'ready' });
}
