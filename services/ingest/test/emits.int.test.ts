import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { create, EmitEventSchema, toBinary } from '@dws/proto';
import { ids, streams, subjects } from '@dws/runtime';
import { modes, startHarness, until, type Harness } from './harness.js';

jest.setTimeout(60_000);
const enc = new TextEncoder();

describe.each(modes())('step.emit hand-offs (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
    await h.register('app', [{ name: 'on-emitted', triggers: [{ event: 'thing.emitted' }] }]);
    await h.bus.ensureStream(streams.ingestCmds);
  });
  afterAll(async () => h?.close());

  it('records an emitted event once and fans it out once, however often the command is redelivered', async () => {
    const eventId = ids.event();
    const cmd = toBinary(
      EmitEventSchema,
      create(EmitEventSchema, { workspaceId: h.ws, eventId, name: 'thing.emitted', data: enc.encode('{"n":1}'), app: 'app', sourceRunId: 'run_src' }),
    );
    // Three deliveries of the same hand-off: distinct msgIds, so the bus's own dedupe does not hide a repeat.
    for (let i = 0; i < 3; i++) await h.bus.publish(subjects.emitEvent, cmd, { msgId: `redelivery-${eventId}-${i}` });
    await h.waitStarts((s) => s.some((x) => x.cmd.eventId === eventId), 20_000, 'the emitted event to start its workflow');
    await until(async () => (await h.db.query('select 1 from ingest.events where id = $1', [eventId])).length === 1, 10_000, 'the event row');
    await new Promise((r) => setTimeout(r, 800));
    const rows = await h.db.query<{ source: string; triggered: { workflow: string }[] }>('select source, triggered from ingest.events where id = $1', [eventId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.source).toBe('emit');
    expect(rows[0]!.triggered.map((t) => t.workflow)).toEqual(['on-emitted']);
    expect([...h.starts.values()].filter((s) => s.cmd.eventId === eventId)).toHaveLength(1);
  });
});
