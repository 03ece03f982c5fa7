import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { create, EmitEventSchema, toBinary } from '@dws/proto';
import { ids, streams, subjects } from '@dws/runtime';
import { uniqueName } from '@dws/testing';
import { modes, startHarness, startsStored, storedStarts, until, type Harness } from './harness.js';

jest.setTimeout(60_000);
const enc = new TextEncoder();
const EMITS = 'ingest-emits';

interface Emit {
  eventId: string;
  name: string;
  /** The emitting run's app (the scheduler fills it from the run). */
  app: string;
  dedupeId?: string;
  targetApp?: string;
  tags?: string[];
  session?: string;
}

const emitCmd = (h: Harness, e: Emit) =>
  toBinary(
    EmitEventSchema,
    create(EmitEventSchema, {
      workspaceId: h.ws, eventId: e.eventId, name: e.name, data: enc.encode('{"n":1}'), app: e.app,
      dedupeId: e.dedupeId ?? '', targetApp: e.targetApp ?? '', sourceRunId: ids.run(), tags: e.tags ?? [], session: e.session ?? '',
    }),
  );

/**
 * Publish emit commands (each under its own msgId, so the bus's dedupe hides
 * nothing) and wait until ingest handled every one of them: a repeat leaves
 * no row, so only the consumer's own count says it was seen.
 */
async function emitAll(h: Harness, cmds: Uint8Array[]): Promise<void> {
  const before = h.handled(EMITS);
  for (const cmd of cmds) await h.bus.publish(subjects.emitEvent, cmd, { msgId: uniqueName('emit') });
  await until(() => h.handled(EMITS) >= before + cmds.length, 20_000, `ingest to handle ${cmds.length} emit commands`);
}

describe.each(modes())('step.emit hand-offs (%s)', (mode) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(mode);
    await h.bus.ensureStream(streams.ingestCmds);
    await h.register('app', [
      { name: 'on-emitted', triggers: [{ event: 'thing.emitted' }] },
      { name: 'app-hears', triggers: [{ event: 'dedupe.me' }] },
    ]);
    await h.register('other', [{ name: 'other-hears', triggers: [{ event: 'dedupe.me' }] }]);
  });
  afterAll(async () => h?.close());

  it('records an emitted event once and fans it out exactly once, however often the command is redelivered', async () => {
    const eventId = ids.event();
    const cmd = emitCmd(h, { eventId, name: 'thing.emitted', app: 'app' });
    await emitAll(h, [cmd, cmd, cmd]);
    const rows = await h.db.query<{ source: string; app: string; triggered: { workflow: string }[] }>(
      'select source, app, triggered from ingest.events where id = $1',
      [eventId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ source: 'emit', app: 'app' });
    expect(rows[0]!.triggered.map((t) => t.workflow)).toEqual(['on-emitted']);
    expect((await startsStored(h, [eventId])).get(eventId)).toBe(1);
    await h.waitStarts((s) => s.some((x) => x.cmd.eventId === eventId), 20_000, 'the emitted event to start its workflow');
  });

  it("records an emit's tags and session on its event and on the runs it starts", async () => {
    const eventId = ids.event();
    await emitAll(h, [emitCmd(h, { eventId, name: 'thing.emitted', app: 'app', tags: ['tenant:acme', 'via:emit'], session: 'chat-7' })]);
    expect((await h.call('events.get', { params: { id: eventId } })).body).toMatchObject({ source: 'emit', tags: ['tenant:acme', 'via:emit'] });
    const starts = (await storedStarts(h)).filter((s) => s.eventId === eventId);
    expect(starts.map((s) => [s.tags, s.session])).toEqual([[['tenant:acme', 'via:emit'], 'chat-7']]);
  });

  it('dedupes a dedupeId per emitting app: another app\'s same id is its own event, and both broadcast', async () => {
    const dedupeId = uniqueName('dd');
    const fromApp = ids.event();
    const fromOther = ids.event();
    const repeat = ids.event(); // another emit step of the same app, same dedupeId
    await emitAll(h, [emitCmd(h, { eventId: fromApp, name: 'dedupe.me', app: 'app', dedupeId })]);
    await emitAll(h, [emitCmd(h, { eventId: fromOther, name: 'dedupe.me', app: 'other', dedupeId })]);
    await emitAll(h, [emitCmd(h, { eventId: repeat, name: 'dedupe.me', app: 'app', dedupeId })]);

    const rows = await h.db.query<{ id: string; app: string; triggered: { app: string; workflow: string }[] }>(
      'select id, app, triggered from ingest.events where dedupe_id = $1 order by received_at',
      [dedupeId],
    );
    expect(rows.map((r) => [r.id, r.app])).toEqual([[fromApp, 'app'], [fromOther, 'other']]);
    // Emitted without targetApp: each broadcasts to every app's triggers, whichever app emitted it.
    for (const r of rows) expect(r.triggered.map((t) => `${t.app}/${t.workflow}`).sort()).toEqual(['app/app-hears', 'other/other-hears']);
    const counts = await startsStored(h, [fromApp, fromOther, repeat]);
    expect(Object.fromEntries(counts)).toEqual({ [fromApp]: 2, [fromOther]: 2, [repeat]: 0 });
  });

  it('narrows an emit with targetApp to that app, deduped still under the emitting app', async () => {
    const dedupeId = uniqueName('dd');
    const narrowed = ids.event();
    await emitAll(h, [emitCmd(h, { eventId: narrowed, name: 'dedupe.me', app: 'app', targetApp: 'other', dedupeId })]);
    const rec = await h.call('events.get', { params: { id: narrowed } });
    expect(rec.body).toMatchObject({ app: 'app', source: 'emit', triggered: [{ app: 'other', workflow: 'other-hears' }] });
    expect(rec.body.triggered).toHaveLength(1);
    // The same dedupeId emitted by the target app is not a repeat: dedupe follows the emitter.
    const fromOther = ids.event();
    await emitAll(h, [emitCmd(h, { eventId: fromOther, name: 'dedupe.me', app: 'other', dedupeId })]);
    expect((await h.call('events.get', { params: { id: fromOther } })).status).toBe(200);
  });
});
