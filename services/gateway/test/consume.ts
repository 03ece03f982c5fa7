import type { Bus } from '@dws/bus';
import { streams } from '@dws/runtime';
import { uniqueName } from '@dws/testing';

/** Read the gateway's facts on `subject` with a consumer of this test's own; returns its stop. */
export async function consumeOnce(bus: Bus, subject: string, fn: (data: Uint8Array) => void): Promise<() => Promise<void>> {
  const sub = await bus.consume({ stream: streams.gatewayFacts.name, durable: uniqueName('test'), filterSubject: subject }, async (msg) => {
    fn(msg.data);
  });
  return () => sub.stop();
}
