import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { get, page, qs, send, session, type Page } from '../api';
import { setQuery, useLocation } from '../router';
import type { Delivery, EndpointStats, Receiver, SourceDelivery, WebhookEndpoint } from '../types';
import { Badge, Confirm, Copy, dur, Empty, ErrorBox, errorText, JsonView, Modal, PageHead, RunLink, Spinner, Tabs, Time, toast, useAsync } from '../ui';

type Tab = 'endpoints' | 'deliveries' | 'receivers' | 'inbound';
const KINDS = ['run.succeeded', 'run.failed', 'run.cancelled', 'step.failed'];
const DELIVERY_STATUSES = ['pending', 'delivering', 'succeeded', 'failed', 'exhausted', 'dead'];

/** Outbound endpoints and their deliveries, inbound receivers and what partners posted to them. */
export function WebhooksPage(): JSX.Element {
  const loc = useLocation();
  const tab = (loc.query.get('tab') as Tab) || 'endpoints';
  return (
    <div class="page">
      <PageHead title="Webhooks" sub="Signed deliveries of run outcomes to your endpoints, and receivers for partners’ webhooks." />
      <Tabs
        label="Webhook sections"
        value={tab}
        onChange={(t) => setQuery({ tab: t === 'endpoints' ? undefined : t })}
        tabs={[
          { id: 'endpoints', label: 'Endpoints' },
          { id: 'deliveries', label: 'Deliveries' },
          { id: 'receivers', label: 'Receivers' },
          { id: 'inbound', label: 'Inbound posts' },
        ]}
      />
      {tab === 'endpoints' && <Endpoints />}
      {tab === 'deliveries' && <Deliveries status={loc.query.get('status') ?? undefined} open={loc.query.get('delivery') ?? undefined} />}
      {tab === 'receivers' && <Receivers />}
      {tab === 'inbound' && <Inbound />}
    </div>
  );
}

/** A secret is shown once (create, rotate): say so, offer copy, never store it. */
function SecretOnce({ secret, onClose, what }: { secret: string; onClose: () => void; what: string }): JSX.Element {
  return (
    <Modal title="Copy the signing secret now" onClose={onClose} footer={<button class="btn btn-primary" onClick={onClose}>I have copied it</button>}>
      <p>
        This is the only time the secret of this {what} is shown. Store it where your code verifies <code>X-Service-Signature</code>.
      </p>
      <div class="secret" data-testid="secret">
        <code>{secret}</code>
        <Copy text={secret} label="secret" />
      </div>
    </Modal>
  );
}

function Endpoints(): JSX.Element {
  const list = useAsync(() => Promise.all([get<WebhookEndpoint[]>('/webhook-endpoints'), get<EndpointStats[]>('/webhook-endpoints/stats')]), []);
  const [editing, setEditing] = useState<WebhookEndpoint | 'new'>();
  const [secret, setSecret] = useState<string>();
  const [deleting, setDeleting] = useState<WebhookEndpoint>();
  const [rotating, setRotating] = useState<WebhookEndpoint>();
  const canWrite = session()?.canWrite;
  if (list.error) return <ErrorBox error={list.error} retry={list.reload} />;
  if (!list.data) return <Spinner label="Loading endpoints" />;
  const [endpoints, stats] = list.data;
  const statOf = (id: string) => stats.find((s) => s.endpointId === id);
  return (
    <>
      <div class="toolbar end">
        {canWrite && <button class="btn btn-primary" onClick={() => setEditing('new')}>Add endpoint</button>}
      </div>
      <div class="card table-card">
        {endpoints.length === 0 ? (
          <Empty title="No endpoints">Add one to receive run.succeeded, run.failed, run.cancelled or step.failed as signed POSTs.</Empty>
        ) : (
          <table class="table">
            <thead>
              <tr>
                <th>Endpoint</th>
                <th>Kinds</th>
                <th>App</th>
                <th>Last 30 days</th>
                <th>Last delivery</th>
                <th>State</th>
                {canWrite && <th><span class="sr">Actions</span></th>}
              </tr>
            </thead>
            <tbody>
              {endpoints.map((e) => {
                const st = statOf(e.id);
                return (
                  <tr key={e.id} data-endpoint={e.id}>
                    <td>
                      <div class="strong">{e.name ?? e.url}</div>
                      <div class="mono small muted">{e.name ? e.url : e.id}</div>
                    </td>
                    <td>{e.eventKinds.map((k) => <span key={k} class="tag">{k}</span>)}</td>
                    <td>{e.app ?? <span class="muted">all</span>}</td>
                    <td class="small">
                      <span class="strong">{st?.delivered ?? 0}</span> delivered
                      <div>
                        <span class="tone-ok">{st?.succeeded ?? 0} succeeded</span> · <span class={st?.failed ? 'tone-bad' : 'muted'}>{st?.failed ?? 0} failed</span>
                      </div>
                    </td>
                    <td><Time at={st?.lastDelivery} /></td>
                    <td><Badge status={e.enabled ? 'live' : 'stale'} label={e.enabled ? 'enabled' : 'disabled'} /></td>
                    {canWrite && (
                      <td class="actions">
                        <button class="btn btn-sm" onClick={() => setEditing(e)}>Edit</button>
                        <button class="btn btn-sm" onClick={() => setRotating(e)}>Rotate secret</button>
                        <button class="btn btn-sm btn-danger-outline" onClick={() => setDeleting(e)}>Delete</button>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </div>
      {editing && (
        <EndpointForm
          endpoint={editing === 'new' ? undefined : editing}
          onClose={() => setEditing(undefined)}
          onSaved={(s) => {
            setEditing(undefined);
            if (s) setSecret(s);
            list.reload();
          }}
        />
      )}
      {rotating && (
        <Confirm
          title="Rotate the signing secret?"
          confirm="Rotate"
          danger
          body={<p>The current secret stops verifying at once: deliveries from now on are signed with the new one.</p>}
          onClose={() => setRotating(undefined)}
          onConfirm={async () => {
            const r = await send<WebhookEndpoint>('PATCH', `/webhook-endpoints/${encodeURIComponent(rotating.id)}`, { rotateSecret: true });
            if (r?.secret) setSecret(r.secret);
          }}
        />
      )}
      {deleting && (
        <Confirm
          title="Delete this endpoint?"
          confirm="Delete"
          danger
          body={<p>No more deliveries go to <code>{deleting.url}</code>. Its past deliveries stay readable.</p>}
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await send('DELETE', `/webhook-endpoints/${encodeURIComponent(deleting.id)}`);
            toast('Endpoint deleted');
            list.reload();
          }}
        />
      )}
      {secret && <SecretOnce secret={secret} what="endpoint" onClose={() => setSecret(undefined)} />}
    </>
  );
}

function EndpointForm({ endpoint, onClose, onSaved }: { endpoint?: WebhookEndpoint; onClose: () => void; onSaved: (secret?: string) => void }): JSX.Element {
  const [url, setUrl] = useState(endpoint?.url ?? '');
  const [name, setName] = useState(endpoint?.name ?? '');
  const [app, setApp] = useState(endpoint?.app ?? '');
  const [kinds, setKinds] = useState<string[]>(endpoint?.eventKinds ?? ['run.failed']);
  const [enabled, setEnabled] = useState(endpoint?.enabled ?? true);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      if (endpoint) {
        await send('PATCH', `/webhook-endpoints/${encodeURIComponent(endpoint.id)}`, { url, eventKinds: kinds, enabled, name: name || null, app: app || null });
        toast('Endpoint saved');
        onSaved();
      } else {
        const r = await send<WebhookEndpoint>('POST', '/webhook-endpoints', { url, eventKinds: kinds, ...(name ? { name } : {}), ...(app ? { app } : {}) });
        toast('Endpoint added');
        onSaved(r?.secret);
      }
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={endpoint ? 'Edit endpoint' : 'Add endpoint'} onClose={onClose}>
      <form onSubmit={submit}>
        <div class="field">
          <label for="ep-url">URL</label>
          <input id="ep-url" type="url" required value={url} placeholder="https://example.com/hooks/dws" onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
        </div>
        <div class="grid2">
          <div class="field">
            <label for="ep-name">Name <span class="muted">(optional)</span></label>
            <input id="ep-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="ep-app">App <span class="muted">(empty: all apps)</span></label>
            <input id="ep-app" value={app} onInput={(e) => setApp((e.target as HTMLInputElement).value)} />
          </div>
        </div>
        <fieldset class="field">
          <legend>Event kinds</legend>
          <div class="checks">
            {KINDS.map((k) => (
              <label key={k} class="check">
                <input type="checkbox" checked={kinds.includes(k)} onChange={(e) => setKinds((e.target as HTMLInputElement).checked ? [...kinds, k] : kinds.filter((x) => x !== k))} />
                {k}
              </label>
            ))}
          </div>
        </fieldset>
        {endpoint && (
          <label class="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled((e.target as HTMLInputElement).checked)} /> Enabled
          </label>
        )}
        {error && <div class="field-error" role="alert">{error}</div>}
        <div class="modal-foot">
          <button type="button" class="btn" onClick={onClose}>Cancel</button>
          <button type="submit" class="btn btn-primary" disabled={busy || kinds.length === 0}>{busy ? 'Saving…' : endpoint ? 'Save' : 'Add endpoint'}</button>
        </div>
      </form>
    </Modal>
  );
}

function Deliveries({ status, open }: { status?: string; open?: string }): JSX.Element {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  useEffect(() => setCursors([undefined]), [status]);
  const cursor = cursors[cursors.length - 1];
  const list = useAsync<Page<Delivery>>(() => page<Delivery>('/webhook-deliveries' + qs({ status, limit: 50, cursor })), [status, cursor]);
  const show = (id: string | undefined) => setQuery({ tab: 'deliveries', status, delivery: id });
  return (
    <>
      <div class="toolbar">
        <label class="filter">
          <span>Status</span>
          <select value={status ?? ''} onChange={(e) => setQuery({ tab: 'deliveries', status: (e.target as HTMLSelectElement).value || undefined })}>
            <option value="">any</option>
            {DELIVERY_STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        <button class="btn btn-sm" onClick={list.reload}>Refresh</button>
      </div>
      <div class="card table-card">
        {list.error && <ErrorBox error={list.error} retry={list.reload} />}
        {!list.data && !list.error && <Spinner label="Loading deliveries" />}
        {list.data && list.data.items.length === 0 && <Empty title="No deliveries">They appear when a subscribed run event happens or a workflow sends a webhook.</Empty>}
        {list.data && list.data.items.length > 0 && (
          <table class="table">
            <thead>
              <tr>
                <th>Status</th>
                <th>Kind</th>
                <th>Destination</th>
                <th>Run</th>
                <th class="num">Attempts</th>
                <th class="num">Last code</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.items.map((d) => (
                <tr key={d.id} class="row-link" data-delivery={d.id}>
                  <td><Badge status={d.status} /></td>
                  <td><span class="tag">{d.eventKind}</span></td>
                  <td>
                    <button class="linkish mono small" onClick={() => show(d.id)}>{d.url}</button>
                  </td>
                  <td>{d.sourceRunId ? <RunLink id={d.sourceRunId} /> : <span class="muted">—</span>}</td>
                  <td class="num">{d.attemptCount}/{d.maxAttempts}</td>
                  <td class="num">{d.lastStatusCode ?? '—'}</td>
                  <td><Time at={d.createdAt} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <div class="pager">
          <div class="muted small">Page {cursors.length}</div>
          <div class="pager-buttons">
            <button class="btn btn-sm" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>← Newer</button>
            <button class="btn btn-sm" disabled={!list.data?.next} onClick={() => setCursors((c) => [...c, list.data!.next])}>Older →</button>
          </div>
        </div>
      </div>
      {open && <DeliveryDetail id={open} onClose={() => show(undefined)} onChanged={list.reload} />}
    </>
  );
}

function DeliveryDetail({ id, onClose, onChanged }: { id: string; onClose: () => void; onChanged: () => void }): JSX.Element {
  const d = useAsync(() => get<Delivery>(`/webhook-deliveries/${encodeURIComponent(id)}`), [id]);
  const [confirm, setConfirm] = useState(false);
  // After a redeliver: the attempt count it started from; the dialog re-reads until a new attempt settles.
  const [following, setFollowing] = useState<number>();
  const x = d.data;
  const settled = following !== undefined && x !== undefined && (x.attempts?.length ?? 0) > following && x.status !== 'pending' && x.status !== 'delivering';
  useEffect(() => {
    if (following === undefined) return;
    if (settled) {
      setFollowing(undefined);
      onChanged();
      return;
    }
    let tries = 0;
    const t = setInterval(() => (++tries > 30 ? setFollowing(undefined) : d.reload()), 1000);
    return () => clearInterval(t);
  }, [following, settled]);
  return (
    <Modal
      title="Delivery"
      wide
      onClose={onClose}
      footer={
        x && session()?.canWrite ? (
          <>
            <button class="btn" onClick={d.reload}>Refresh</button>
            <button class="btn btn-primary" disabled={x.status === 'delivering' || following !== undefined} onClick={() => setConfirm(true)}>
              {following !== undefined ? 'Redelivering…' : 'Redeliver'}
            </button>
          </>
        ) : undefined
      }
    >
      {d.error && <ErrorBox error={d.error} retry={d.reload} />}
      {!x && !d.error && <Spinner />}
      {x && (
        <>
          <div class="kv">
            <div>Status</div>
            <div><Badge status={x.status} /></div>
            <div>Id</div>
            <div class="mono">{x.id}</div>
            <div>Kind</div>
            <div>{x.eventKind}</div>
            <div>URL</div>
            <div class="mono">{x.url}</div>
            {x.sourceRunId && (
              <>
                <div>Run</div>
                <div><RunLink id={x.sourceRunId} /></div>
              </>
            )}
            <div>Attempts</div>
            <div>{x.attemptCount} of {x.maxAttempts}</div>
            {x.nextAttemptAt && (
              <>
                <div>Next attempt</div>
                <div><Time at={x.nextAttemptAt} /></div>
              </>
            )}
          </div>
          <h4>Attempts</h4>
          {(x.attempts ?? []).length === 0 ? (
            <p class="muted">No attempt yet.</p>
          ) : (
            <table class="table attempts">
              <thead>
                <tr>
                  <th>#</th>
                  <th>Outcome</th>
                  <th class="num">Code</th>
                  <th class="num">Took</th>
                  <th>When</th>
                  <th>Response or error</th>
                </tr>
              </thead>
              <tbody>
                {x.attempts!.map((a) => (
                  <tr key={a.id} data-attempt={a.attempt}>
                    <td>{a.attempt}</td>
                    <td><Badge status={a.outcome === 'succeeded' ? 'succeeded' : a.outcome === 'skipped' ? 'skipped' : 'failed'} label={a.outcome.replace(/_/g, ' ')} /></td>
                    <td class="num">{a.statusCode ?? '—'}</td>
                    <td class="num">{dur(a.durationMs)}</td>
                    <td><Time at={a.createdAt} /></td>
                    <td class="mono small clip">{a.error ?? a.responseSnippet ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h4>Payload</h4>
          <JsonView value={x.payload} />
        </>
      )}
      {confirm && x && (
        <Confirm
          title="Redeliver?"
          confirm="Redeliver"
          body={<p>The delivery is queued again with a fresh retry budget; its attempt log is kept.</p>}
          onClose={() => setConfirm(false)}
          onConfirm={async () => {
            await send('POST', `/webhook-deliveries/${encodeURIComponent(x.id)}/redeliver`);
            toast('Redelivery queued');
            setFollowing(x.attempts?.length ?? 0);
            d.reload();
            onChanged();
          }}
        />
      )}
    </Modal>
  );
}

function Receivers(): JSX.Element {
  const list = useAsync(() => get<Receiver[]>('/webhook-receivers'), []);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<string>();
  const [deleting, setDeleting] = useState<Receiver>();
  const canWrite = session()?.canWrite;
  if (list.error) return <ErrorBox error={list.error} retry={list.reload} />;
  if (!list.data) return <Spinner label="Loading receivers" />;
  return (
    <>
      <div class="toolbar end">{canWrite && <button class="btn btn-primary" onClick={() => setCreating(true)}>Add receiver</button>}</div>
      <div class="card table-card">
        {list.data.length === 0 ? (
          <Empty title="No receivers">A receiver gives a partner a URL to POST signed webhooks to; each verified post becomes an event.</Empty>
        ) : (
          <table class="table">
            <thead>
              <tr>
                <th>Receiver</th>
                <th>URL</th>
                <th>Becomes event</th>
                <th>App</th>
                <th>State</th>
                {canWrite && <th><span class="sr">Actions</span></th>}
              </tr>
            </thead>
            <tbody>
              {list.data.map((r) => {
                const url = `${location.origin}/v1/webhooks/${r.slug}`;
                return (
                  <tr key={r.id} data-receiver={r.id}>
                    <td>
                      <div class="strong">{r.name ?? r.eventName}</div>
                      <div class="mono small muted">{r.id}</div>
                    </td>
                    <td>
                      <div class="url-cell">
                        <span class="mono small clip" title={url}>{url}</span>
                        <Copy text={url} label="URL" />
                      </div>
                    </td>
                    <td>
                      <code>{r.transform?.name ?? r.eventName}</code>
                      {r.transform?.if && (
                        <div class="small muted">
                          when <code>{r.transform.if}</code>
                        </div>
                      )}
                    </td>
                    <td>{r.targetApp ?? r.app ?? <span class="muted">all</span>}</td>
                    <td><Badge status={r.enabled ? 'live' : 'stale'} label={r.enabled ? 'enabled' : 'disabled'} /></td>
                    {canWrite && (
                      <td class="actions">
                        <button
                          class="btn btn-sm"
                          onClick={async () => {
                            try {
                              await send('PATCH', `/webhook-receivers/${encodeURIComponent(r.id)}`, { enabled: !r.enabled });
                              list.reload();
                            } catch (err) {
                              toast(errorText(err), 'error');
                            }
                          }}
                        >
                          {r.enabled ? 'Disable' : 'Enable'}
                        </button>
                        <button
                          class="btn btn-sm"
                          onClick={async () => {
                            try {
                              const x = await send<Receiver>('PATCH', `/webhook-receivers/${encodeURIComponent(r.id)}`, { rotateSecret: true });
                              if (x?.secret) setSecret(x.secret);
                            } catch (err) {
                              toast(errorText(err), 'error');
                            }
                          }}
                        >
                          Rotate secret
                        </button>
                        <button class="btn btn-sm btn-danger-outline" onClick={() => setDeleting(r)}>Delete</button>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </div>
      {creating && (
        <ReceiverForm
          onClose={() => setCreating(false)}
          onSaved={(s) => {
            setCreating(false);
            setSecret(s);
            list.reload();
          }}
        />
      )}
      {deleting && (
        <Confirm
          title="Delete this receiver?"
          confirm="Delete"
          danger
          body={<p>Posts to its URL will be answered 404. What it received stays readable.</p>}
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await send('DELETE', `/webhook-receivers/${encodeURIComponent(deleting.id)}`);
            list.reload();
          }}
        />
      )}
      {secret && <SecretOnce secret={secret} what="receiver" onClose={() => setSecret(undefined)} />}
    </>
  );
}

/** A receiver's transform, as the form edits it: each a CEL expression, blank for none. */
const TRANSFORM_FIELDS = [
  { key: 'if', label: 'Only posts where', placeholder: `headers['x-github-event'] != 'ping'` },
  { key: 'name', label: 'Event name from', placeholder: `'github/' + headers['x-github-event']` },
  { key: 'data', label: 'Event data from', placeholder: 'body.data.object' },
  { key: 'id', label: 'Dedupe id from', placeholder: 'body.id' },
] as const;
type TransformDraft = Record<(typeof TRANSFORM_FIELDS)[number]['key'], string>;

function ReceiverForm({ onClose, onSaved }: { onClose: () => void; onSaved: (secret: string) => void }): JSX.Element {
  const [eventName, setEventName] = useState('');
  const [name, setName] = useState('');
  const [app, setApp] = useState('');
  const [transform, setTransform] = useState<TransformDraft>({ if: '', name: '', data: '', id: '' });
  const [error, setError] = useState<string>();
  const given = Object.fromEntries(Object.entries(transform).filter(([, v]) => v.trim() !== ''));
  return (
    <Modal title="Add receiver" onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          try {
            const r = await send<Receiver>('POST', '/webhook-receivers', {
              eventName,
              ...(name ? { name } : {}),
              ...(app ? { app } : {}),
              ...(Object.keys(given).length ? { transform: given } : {}),
            });
            onSaved(r!.secret!);
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        <div class="field">
          <label for="rc-event">Event name</label>
          <input id="rc-event" required value={eventName} placeholder="payment.received" onInput={(e) => setEventName((e.target as HTMLInputElement).value)} />
        </div>
        <div class="grid2">
          <div class="field">
            <label for="rc-name">Name <span class="muted">(optional)</span></label>
            <input id="rc-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="rc-app">App <span class="muted">(optional)</span></label>
            <input id="rc-app" value={app} onInput={(e) => setApp((e.target as HTMLInputElement).value)} />
          </div>
        </div>
        <details>
          <summary class="small muted">Transform (optional): CEL over the post's <code>body</code> and <code>headers</code></summary>
          {TRANSFORM_FIELDS.map((f) => (
            <div class="field" key={f.key}>
              <label for={`rc-t-${f.key}`}>{f.label}</label>
              <input
                id={`rc-t-${f.key}`}
                class="mono"
                value={transform[f.key]}
                placeholder={f.placeholder}
                onInput={(e) => setTransform((t) => ({ ...t, [f.key]: (e.target as HTMLInputElement).value }))}
              />
            </div>
          ))}
        </details>
        {error && <div class="field-error" role="alert">{error}</div>}
        <div class="modal-foot">
          <button type="button" class="btn" onClick={onClose}>Cancel</button>
          <button type="submit" class="btn btn-primary">Add receiver</button>
        </div>
      </form>
    </Modal>
  );
}

function Inbound(): JSX.Element {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors[cursors.length - 1];
  const list = useAsync<Page<SourceDelivery>>(() => page<SourceDelivery>('/webhook-source-deliveries' + qs({ limit: 50, cursor })), [cursor]);
  return (
    <div class="card table-card">
      {list.error && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && !list.error && <Spinner />}
      {list.data && list.data.items.length === 0 && <Empty title="Nothing received yet">Posts to a receiver’s URL are listed here, refused ones included.</Empty>}
      {list.data && list.data.items.length > 0 && (
        <table class="table">
          <thead>
            <tr>
              <th>Outcome</th>
              <th>Receiver</th>
              <th>Reason</th>
              <th class="num">Size</th>
              <th>Event</th>
              <th>Received</th>
            </tr>
          </thead>
          <tbody>
            {list.data.items.map((s) => (
              <tr key={s.id}>
                <td>
                  {s.outcome === 'verified' ? (
                    <Badge status="accepted" label="verified" />
                  ) : s.outcome === 'filtered' ? (
                    <Badge status="filtered" label="filtered (no event)" />
                  ) : (
                    <Badge status="rejected" label={`refused: ${String(s.outcome ?? 'unknown').replace(/_/g, ' ')}`} />
                  )}
                </td>
                <td class="mono small">{s.slug}</td>
                <td class="small">{s.reason ?? ''}</td>
                <td class="num">{typeof s.sizeBytes === 'number' ? `${s.sizeBytes} B` : '—'}</td>
                <td class="mono small">{s.eventId ? <a class="link" href={`/runs?eventId=${encodeURIComponent(s.eventId)}`}>{s.eventId}</a> : '—'}</td>
                <td><Time at={s.createdAt} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="pager">
        <div class="muted small">Page {cursors.length}</div>
        <div class="pager-buttons">
          <button class="btn btn-sm" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>← Newer</button>
          <button class="btn btn-sm" disabled={!list.data?.next} onClick={() => setCursors((c) => [...c, list.data!.next])}>Older →</button>
        </div>
      </div>
    </div>
  );
}
