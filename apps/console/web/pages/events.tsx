import { Fragment, type JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { get, qs, send, session, stream } from '../api';
import { Link, setQuery, useLocation } from '../router';
import type { EventRecord } from '../types';
import { Empty, ErrorBox, JsonEditor, jsonDraft, JsonView, LiveDot, Modal, PageHead, RunLink, Spinner, splitTags, TagChips, Time, toast, errorText, useAsync, type JsonDraft } from '../ui';

interface IngestResult {
  id?: string;
  runId?: string;
  woke: number;
  triggered: { workflow: string; app: string; runId: string }[];
  skipped?: boolean;
  dropped?: boolean;
  debounced?: boolean;
  batched?: boolean;
  deduped?: boolean;
  suspended?: boolean;
  scheduled?: boolean;
  scheduledFor?: string;
}

/**
 * The event log (newest first) with each event's fan-out (runs it started,
 * waiters it woke), a live tail from GET /v1/events/stream, the events sent
 * with a delay that wait for their time (cancellable), and a form that
 * sends a test event (now or later) and links the runs it started.
 */
export function EventsPage(): JSX.Element {
  const loc = useLocation();
  const name = loc.query.get('name') ?? undefined;
  const app = loc.query.get('app') ?? undefined;
  const sendName = loc.query.get('send') ?? undefined;
  const list = useAsync(() => get<EventRecord[]>('/events' + qs({ name, app, limit: 200 })), [name, app]);
  const scheduled = useAsync(() => get<EventRecord[]>('/events/scheduled' + qs({ name, app, limit: 200 })), [name, app]);
  const [tail, setTail] = useState<EventRecord[]>([]);
  const [live, setLive] = useState(false);
  const [following, setFollowing] = useState(true);
  const [openId, setOpenId] = useState<string>();
  const [sending, setSending] = useState<boolean>(!!sendName);
  useEffect(() => setTail([]), [list.data]);
  useEffect(() => {
    if (!following) return setLive(false);
    const ctl = new AbortController();
    stream(
      '/events/stream',
      (f) => {
        const e = f.data as EventRecord;
        if (!e?.id || (name && e.name !== name) || (app && e.app !== app)) return;
        setTail((t) => (t.some((x) => x.id === e.id) ? t : [e, ...t].slice(0, 200)));
      },
      { signal: ctl.signal, onState: setLive },
    );
    return () => ctl.abort();
  }, [following, name, app]);
  const [nameDraft, setNameDraft] = useState(name ?? '');
  const fresh = new Set(tail.map((e) => e.id));
  // The live frame carries less than GET /events (no tags): an event both tailed and listed shows as listed.
  const listed = new Map((list.data ?? []).map((e) => [e.id, e]));
  const events = [...tail.map((e) => listed.get(e.id) ?? e), ...(list.data ?? []).filter((e) => !fresh.has(e.id))];

  return (
    <div class="page">
      <PageHead title="Events" sub="Every ingested and emitted event, with the runs it started.">
        <LiveDot live={live} />
        <label class="check">
          <input type="checkbox" checked={following} onChange={(e) => setFollowing((e.target as HTMLInputElement).checked)} />
          Live tail
        </label>
        {session()?.canWrite && (
          <button class="btn btn-primary" onClick={() => setSending(true)}>
            Send test event
          </button>
        )}
      </PageHead>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery({ name: nameDraft.trim() || undefined, app });
        }}
      >
        <div class="search">
          <input type="search" aria-label="Event name" placeholder="Exact event name, e.g. user.signed_up" value={nameDraft} onInput={(e) => setNameDraft((e.target as HTMLInputElement).value)} />
          <button class="btn" type="submit">Filter</button>
          {(name || app) && (
            <button class="btn btn-ghost" type="button" onClick={() => (setNameDraft(''), setQuery({}))}>
              Clear
            </button>
          )}
        </div>
      </form>
      {(scheduled.data?.length ?? 0) > 0 && <Scheduled events={scheduled.data!} onChange={() => (scheduled.reload(), list.reload())} />}
      <div class="card table-card">
        {list.error && <ErrorBox error={list.error} retry={list.reload} />}
        {!list.data && !list.error && <Spinner label="Loading events" />}
        {list.data && events.length === 0 && <Empty title="No events yet">Send a test event, or POST /v1/events with a secret key.</Empty>}
        {events.length > 0 && (
          <table class="table">
            <thead>
              <tr>
                <th>Event</th>
                <th>Source</th>
                <th>App</th>
                <th>Received</th>
                <th>Fan-out</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e) => (
                <Fragment key={e.id}>
                  <tr class={`row-link ${fresh.has(e.id) ? 'fresh' : ''}`} data-event={e.id}>
                    <td>
                      <button class="linkish" aria-expanded={openId === e.id} onClick={() => setOpenId(openId === e.id ? undefined : e.id)}>
                        <span class="strong">{e.name}</span>
                      </button>
                      <div class="mono small muted">{e.id}</div>
                      <TagChips tags={e.tags} />
                    </td>
                    <td><span class="tag">{e.source}</span></td>
                    <td>{e.app ?? <span class="muted">all</span>}</td>
                    <td><Time at={e.receivedAt} /></td>
                    <td>
                      <FanOut e={e} />
                    </td>
                  </tr>
                  {openId === e.id && (
                    <tr class="detail-row">
                      <td colSpan={5}>
                        <JsonView value={e.data} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        )}
      </div>
      {sending && <SendEvent initialName={sendName} onClose={() => (setSending(false), sendName && setQuery({ name, app }))} onSent={() => (list.reload(), scheduled.reload())} />}
    </div>
  );
}

/** Events sent with a delay, soonest first: each is taken in at its time, or dropped by Cancel before it. */
function Scheduled({ events, onChange }: { events: EventRecord[]; onChange: () => void }): JSX.Element {
  const [busy, setBusy] = useState<string>();
  const cancel = async (id: string) => {
    setBusy(id);
    try {
      await send('POST', `/events/${encodeURIComponent(id)}/cancel`);
      toast('Scheduled event cancelled: it will not be taken in');
    } catch (err) {
      toast(errorText(err));
    } finally {
      setBusy(undefined);
      onChange();
    }
  };
  return (
    <section data-testid="scheduled-events">
      <h2 class="section-title">Scheduled</h2>
      <div class="card table-card">
        <table class="table">
          <thead>
            <tr>
              <th>Event</th>
              <th>App</th>
              <th>Taken in</th>
              <th>Sent</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr key={e.id} data-event={e.id}>
                <td>
                  <span class="strong">{e.name}</span>
                  <div class="mono small muted">{e.id}</div>
                  <TagChips tags={e.tags} />
                </td>
                <td>{e.app ?? <span class="muted">all</span>}</td>
                <td><Time at={e.scheduledFor} /></td>
                <td><Time at={e.receivedAt} /></td>
                <td>
                  {session()?.canWrite && (
                    <button class="btn btn-sm btn-danger-outline" disabled={busy === e.id} onClick={() => void cancel(e.id)}>
                      Cancel
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function FanOut({ e }: { e: EventRecord }): JSX.Element {
  if (e.triggered.length === 0 && e.woke === 0) return <span class="muted">matched nothing</span>;
  return (
    <div class="fanout">
      {e.triggered.slice(0, 4).map((t) => (
        <span key={t.runId} class="fan">
          {t.workflow} → <RunLink id={t.runId} />
        </span>
      ))}
      {e.triggered.length > 4 && (
        <Link class="link small" href={`/runs?eventId=${encodeURIComponent(e.id)}`}>
          +{e.triggered.length - 4} more
        </Link>
      )}
      {e.woke > 0 && <span class="tag">woke {e.woke}</span>}
    </div>
  );
}

function SendEvent({ initialName, onClose, onSent }: { initialName?: string; onClose: () => void; onSent: () => void }): JSX.Element {
  const [name, setName] = useState(initialName ?? '');
  const [app, setApp] = useState('');
  const [delay, setDelay] = useState('');
  const [tags, setTags] = useState('');
  const [draft, setDraft] = useState<JsonDraft>(jsonDraft({}));
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<IngestResult>();
  const [error, setError] = useState<string>();
  const submit = async (ev: Event) => {
    ev.preventDefault();
    if (!name.trim() || !draft.valid) return;
    setBusy(true);
    setError(undefined);
    try {
      const tagList = splitTags(tags);
      const r = await send<IngestResult>('POST', '/events', {
        name: name.trim(),
        ...(app.trim() ? { app: app.trim() } : {}),
        ...(delay.trim() ? { delay: /^\d+$/.test(delay.trim()) ? Number(delay.trim()) : delay.trim() } : {}),
        ...(tagList.length ? { tags: tagList } : {}),
        data: draft.value,
      });
      setResult(r);
      const n = r?.triggered.length ?? 0;
      toast(r?.scheduled ? 'Event scheduled' : n === 0 ? 'Event sent: it started no run' : `Event sent: it started ${n} ${n === 1 ? 'run' : 'runs'}`);
      onSent();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="Send a test event" onClose={onClose} wide>
      {result ? (
        <div class="send-result" data-testid="send-result">
          <p>
            <strong>Accepted</strong>
            {result.id && <> as <span class="mono">{result.id}</span></>}.{' '}
            {result.scheduled
              ? <>It is stored until <Time at={result.scheduledFor} /> ({new Date(result.scheduledFor!).toLocaleString()}), then taken in: its runs start then.</>
              : result.triggered.length === 0
              ? 'It started no run: no workflow trigger matches its name.'
              : `It started ${result.triggered.length === 1 ? 'this run' : `these ${result.triggered.length} runs`}:`}
            {result.woke > 0 && ` It also woke ${result.woke} waiting ${result.woke === 1 ? 'run' : 'runs'}.`}
            {result.suspended && ' The workspace is suspended: no run started.'}
            {result.deduped && ' It was a duplicate and was dropped.'}
          </p>
          {result.triggered.length > 0 && (
            <ul class="plain">
              {result.triggered.map((t) => (
                <li key={t.runId}>
                  <span class="strong">{t.workflow}</span> ({t.app}) → <RunLink id={t.runId} />
                </li>
              ))}
            </ul>
          )}
          <div class="modal-foot">
            <button class="btn" onClick={() => setResult(undefined)}>Send another</button>
            <button class="btn btn-primary" onClick={onClose}>Done</button>
          </div>
        </div>
      ) : (
        <form onSubmit={submit}>
          <div class="grid2">
            <div class="field">
              <label for="ev-name">Event name</label>
              <input id="ev-name" required value={name} maxLength={256} placeholder="user.signed_up" onInput={(e) => setName((e.target as HTMLInputElement).value)} />
            </div>
            <div class="field">
              <label for="ev-app">App <span class="muted">(optional: all apps)</span></label>
              <input id="ev-app" value={app} maxLength={256} onInput={(e) => setApp((e.target as HTMLInputElement).value)} />
            </div>
          </div>
          <div class="field">
            <label for="ev-delay">Delay <span class="muted">(optional: ms, "30s", "2h", "1d" or a timestamp; empty: now)</span></label>
            <input id="ev-delay" value={delay} maxLength={64} placeholder="now" onInput={(e) => setDelay((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="ev-tags">Tags <span class="muted">(optional: comma-separated, given to the runs it starts)</span></label>
            <input id="ev-tags" value={tags} placeholder="tenant:acme, user:42" onInput={(e) => setTags((e.target as HTMLInputElement).value)} />
          </div>
          <JsonEditor id="ev-data" label="Data" draft={draft} onChange={setDraft} rows={10} />
          {error && <div class="field-error" role="alert">{error}</div>}
          <div class="modal-foot">
            <button type="button" class="btn" onClick={onClose}>Cancel</button>
            <button type="submit" class="btn btn-primary" disabled={busy || !draft.valid || !name.trim()}>
              {busy ? 'Sending…' : 'Send event'}
            </button>
          </div>
        </form>
      )}
    </Modal>
  );
}
