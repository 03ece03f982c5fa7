import type { Bus, ConsumerSpec, StreamSpec } from './types.js';

/**
 * A Bus whose stream names and subjects all live under a namespace, so
 * several fleets (test files, tenants of one NATS) share a server without
 * seeing each other. `prefixedBus(bus, 't1')`: stream `SCHEDULER_CMDS`
 * becomes `T1_SCHEDULER_CMDS`, subject `scheduler.cmd.start` becomes
 * `t1.scheduler.cmd.start`. An empty prefix returns the bus unchanged.
 */
export function prefixedBus(bus: Bus, prefix: string): Bus {
  if (!prefix) return bus;
  const subj = (s: string) => `${prefix}.${s}`;
  const strip = (s: string) => (s.startsWith(`${prefix}.`) ? s.slice(prefix.length + 1) : s);
  const streams = namespaceStreams(prefix);
  const stream = (n: string) => `${streams}${n}`;
  return {
    kind: bus.kind,
    ensureStream: (spec: StreamSpec) => bus.ensureStream({ ...spec, name: stream(spec.name), subjects: spec.subjects.map(subj) }),
    publish: (subject, data, opts) => bus.publish(subj(subject), data, opts),
    consume: (spec: ConsumerSpec, handler) =>
      bus.consume(
        {
          ...spec,
          stream: stream(spec.stream),
          filterSubject: spec.filterSubject === undefined ? undefined : subj(spec.filterSubject),
          deadLetterSubject: spec.deadLetterSubject === undefined ? undefined : subj(spec.deadLetterSubject),
        },
        (msg) =>
          handler({
            get subject() {
              return strip(msg.subject);
            },
            data: msg.data,
            seq: msg.seq,
            msgId: msg.msgId,
            headers: msg.headers,
            deliveryCount: msg.deliveryCount,
            working: () => msg.working(),
          }),
      ),
    request: (subject, data, opts) => bus.request(subj(subject), data, opts),
    respond: (subject, group, handler) => bus.respond(subj(subject), group, (data, s, headers) => handler(data, strip(s), headers)),
    emit: (subject, data) => bus.emit(subj(subject), data),
    subscribe: (subject, handler) => bus.subscribe(subj(subject), (data, s) => handler(data, strip(s))),
    healthy: () => bus.healthy(),
    // Another prefix's durables on a shared bus are not ours: only this prefix's, named as given.
    backlog: async () =>
      (await bus.backlog()).filter((b) => b.stream.startsWith(streams)).map((b) => ({ ...b, stream: b.stream.slice(streams.length) })),
    close: () => bus.close(),
  };
}

/** What the names of a namespace's streams begin with: `t1` -> `T1_`. */
export function namespaceStreams(prefix: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) throw new Error(`bus prefix must be letters, digits, _ or -: ${prefix}`);
  return `${prefix.toUpperCase().replace(/-/g, '_')}_`;
}
