import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { get, send, session } from '../api';
import { Link } from '../router';
import type { Runner, Schedule, Workflow } from '../types';
import { Badge, Confirm, Empty, ErrorBox, JsonEditor, jsonDraft, JsonView, Modal, PageHead, Spinner, splitTags, TagChips, Time, errorText, toast, useAsync, type JsonDraft } from '../ui';

/** Connected runners: liveness, whether their signing key matches, runtime and version, last heartbeat. */
export function RunnersPage(): JSX.Element {
  const list = useAsync(() => get<Runner[]>('/runners'), []);
  return (
    <div class="page">
      <PageHead title="Runners" sub="Processes serving your workflows. A runner is live while it heartbeats (every 30 s; stale after 90 s).">
        <button class="btn" onClick={list.reload}>Refresh</button>
      </PageHead>
      <div class="card table-card">
        {list.error && <ErrorBox error={list.error} retry={list.reload} />}
        {!list.data && !list.error && <Spinner label="Loading runners" />}
        {list.data && list.data.length === 0 && <Empty title="No runner has registered">Start a runner with the SDK: it registers at start and heartbeats while it lives.</Empty>}
        {list.data && list.data.length > 0 && (
          <table class="table">
            <thead>
              <tr>
                <th>State</th>
                <th>Runner</th>
                <th>App</th>
                <th>Address</th>
                <th>Runtime</th>
                <th>Signing key</th>
                <th>Last seen</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((r) => (
                <tr key={`${r.app}/${r.id}`}>
                  <td><Badge status={r.live ? 'live' : 'stale'} label={r.live ? 'live' : 'stale'} /></td>
                  <td class="mono small">{r.id}</td>
                  <td>{r.app}</td>
                  <td class="mono small">{r.url}</td>
                  <td>{[r.runtime, r.language, r.version].filter(Boolean).join(' · ') || <span class="muted">—</span>}</td>
                  <td>{r.keyMatch ? <Badge status="succeeded" label="matches" /> : <Badge status="failed" label="mismatch" />}</td>
                  <td><Time at={r.lastSeen} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </div>
  );
}

/** Registered workflows: triggers, cron schedules (registered and made through the API, which can be made, paused, resumed and deleted here), retry policy and the declared step manifest; each can be paused and resumed. */
export function WorkflowsPage(): JSX.Element {
  const list = useAsync(() => get<Workflow[]>('/workflows'), []);
  const schedules = useAsync(() => get<Schedule[]>('/schedules?limit=1000'), []);
  const [busy, setBusy] = useState<string>();
  const [making, setMaking] = useState<Workflow>();
  const [pausing, setPausing] = useState<Workflow>();
  const [hold, setHold] = useState(false);
  const scheduleOf = (w: Workflow) => (schedules.data ?? []).filter((s) => s.app === w.app && s.workflow === w.name);
  const remove = async (s: Schedule) => {
    setBusy(s.id);
    try {
      await send('DELETE', `/schedules/${encodeURIComponent(s.id)}`);
      toast('Schedule deleted: no later tick starts a run');
    } catch (err) {
      toast(errorText(err), 'error');
    } finally {
      setBusy(undefined);
      schedules.reload();
    }
  };
  const toggleSchedule = async (s: Schedule) => {
    setBusy(s.id);
    try {
      await send('POST', `/schedules/${encodeURIComponent(s.id)}/${s.paused ? 'resume' : 'pause'}`);
      toast(s.paused ? 'Schedule resumed: it fires from its next tick' : 'Schedule paused: its ticks start no run until it is resumed');
    } catch (err) {
      toast(errorText(err), 'error');
    } finally {
      setBusy(undefined);
      schedules.reload();
    }
  };
  const toggle = async (w: Workflow, holdEvents = false) => {
    const action = w.paused ? 'resume' : 'pause';
    setBusy(`${w.app}/${w.name}`);
    try {
      await send('POST', `/workflows/${action}`, { app: w.app, workflow: w.name, ...(action === 'pause' && holdEvents ? { hold: true } : {}) });
      toast(
        w.paused
          ? `${w.name} resumed: its events start runs again${w.paused.hold ? ', the held ones first' : ''}`
          : `${w.name} paused: its events start no run until resumed${holdEvents ? ' (they are held until then)' : ''}`,
      );
    } catch (err) {
      toast(errorText(err), 'error');
    } finally {
      setBusy(undefined);
      list.reload();
    }
  };
  return (
    <div class="page">
      <PageHead title="Workflows" sub="What your runners registered: triggers, schedules, retry policy and steps." />
      {list.error && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && !list.error && <Spinner label="Loading workflows" />}
      {list.data && list.data.length === 0 && (
        <div class="card">
          <Empty title="No workflows registered" />
        </div>
      )}
      <div class="wf-cards">
        {list.data?.map((w) => (
          <article key={`${w.app}/${w.name}`} class="card wf-card" aria-label={w.name}>
            <header class="wf-card-head">
              <div>
                <h3>
                  {w.name} {w.paused && <Badge status="paused" />}
                </h3>
                <div class="muted small">app {w.app}</div>
              </div>
              <div class="row-actions">
                {session()?.canWrite && (
                  <button class="btn btn-sm" disabled={busy === `${w.app}/${w.name}`} onClick={() => (w.paused ? void toggle(w) : (setHold(false), setPausing(w)))}>
                    {w.paused ? 'Resume' : 'Pause'}
                  </button>
                )}
                <Link class="btn btn-sm" href={`/runs?workflow=${encodeURIComponent(w.name)}${w.app ? `&app=${encodeURIComponent(w.app)}` : ''}`}>Runs →</Link>
              </div>
            </header>
            {w.paused && (
              <p class="small muted">
                Paused by {w.paused.by} <Time at={w.paused.at} />: its events and cron ticks start no run until it is resumed; runs under way go on.
                {w.paused.hold ? <HeldCount w={w} /> : ' Events sent meanwhile start none later.'}
              </p>
            )}
            <div class="kv">
              <div>Triggers</div>
              <div>
                {(w.triggers ?? []).length === 0 ? (
                  <span class="tag">event {w.name}</span>
                ) : (
                  w.triggers!.map((t, i) => (
                    <span key={i} class="tag" title={t.if ? `if ${t.if}` : undefined}>
                      {t.cron ? `cron ${t.cron}` : `event ${t.event}`}
                      {t.if ? ' (if …)' : ''}
                    </span>
                  ))
                )}
              </div>
              {w.scheduled && (
                <>
                  <div>Schedules</div>
                  <div>{w.schedules.map((s) => <code key={s}>{s}</code>)}</div>
                </>
              )}
              <div>Retries</div>
              <div>{retryText(w.retry)}</div>
              {limitText(w) && (
                <>
                  <div>Concurrency</div>
                  <div>{limitText(w)}</div>
                </>
              )}
              {singletonText(w) && (
                <>
                  <div>Singleton</div>
                  <div>{singletonText(w)}</div>
                </>
              )}
              {(scheduleOf(w).length > 0 || session()?.canWrite) && (
                <>
                  <div>API schedules</div>
                  <div>
                    {scheduleOf(w).length > 0 && (
                      <ul class="plain" data-testid="api-schedules">
                        {scheduleOf(w).map((sc) => (
                          <li key={sc.id} class="sched" data-schedule={sc.id}>
                            <code>{sc.cron}</code>
                            {sc.timezone !== 'UTC' && !sc.cron.startsWith('TZ=') && <span class="muted small">{sc.timezone}</span>}
                            {sc.externalId && <span class="tag">{sc.externalId}</span>}
                            <TagChips tags={sc.tags} />
                            {sc.paused ? (
                              <span title={`Paused by ${sc.paused.by} at ${new Date(sc.paused.at).toLocaleString()}`}>
                                <Badge status="paused" />
                              </span>
                            ) : (
                              <span class="muted small">next <Time at={sc.nextRunAt} /></span>
                            )}
                            {session()?.canWrite && (
                              <span class="sched-actions">
                                <button class="btn btn-sm" aria-label={`${sc.paused ? 'Resume' : 'Pause'} schedule ${sc.externalId ?? sc.id}`} disabled={busy === sc.id} onClick={() => void toggleSchedule(sc)}>
                                  {sc.paused ? 'Resume' : 'Pause'}
                                </button>
                                <button class="btn-icon" title="Delete this schedule" aria-label={`Delete schedule ${sc.externalId ?? sc.id}`} disabled={busy === sc.id} onClick={() => void remove(sc)}>
                                  ✕
                                </button>
                              </span>
                            )}
                          </li>
                        ))}
                      </ul>
                    )}
                    {session()?.canWrite && (
                      <button class="btn btn-sm" onClick={() => setMaking(w)}>
                        New schedule
                      </button>
                    )}
                  </div>
                </>
              )}
              {typeof w.updatedAt === 'string' && (
                <>
                  <div>Registered</div>
                  <div><Time at={w.updatedAt} /></div>
                </>
              )}
            </div>
            {w.steps && w.steps.length > 0 && (
              <ol class="steps-manifest">
                {w.steps.filter((s) => !s.hidden).map((s) => (
                  <li key={s.name}>
                    <span class="strong">{s.name}</span>
                    {s.description && <span class="muted"> — {s.description}</span>}
                  </li>
                ))}
              </ol>
            )}
            <details>
              <summary class="small muted">Definition</summary>
              <JsonView value={w} />
            </details>
          </article>
        ))}
      </div>
      {making && <NewSchedule w={making} onClose={() => setMaking(undefined)} onSaved={schedules.reload} />}
      {pausing && (
        <Confirm
          title={`Pause ${pausing.name}`}
          confirm="Pause"
          body={
            <>
              <p>Its events and cron ticks start no run until it is resumed; runs under way go on.</p>
              <label class="check">
                <input type="checkbox" checked={hold} onChange={(e) => setHold((e.target as HTMLInputElement).checked)} /> Hold its events: start their runs once it is resumed
              </label>
            </>
          }
          onConfirm={() => toggle(pausing, hold)}
          onClose={() => setPausing(undefined)}
        />
      )}
    </div>
  );
}

/** How many events a workflow paused with hold keeps (GET /v1/events/held): the runs its resume will start. */
function HeldCount({ w }: { w: Workflow }): JSX.Element {
  const held = useAsync(() => get<unknown[]>(`/events/held?app=${encodeURIComponent(w.app)}&workflow=${encodeURIComponent(w.name)}&limit=1000`), [w.app, w.name, w.paused?.at]);
  const n = held.data?.length;
  return (
    <span data-testid="held-count">
      {' '}Its events are held{n === undefined ? '' : ` (${n === 1000 ? '1,000 or more' : n.toLocaleString()} so far)`}: their runs start once it is resumed.
    </span>
  );
}

/** POST /schedules for one workflow; a refused pattern or zone shows in the form, with the API's reason. */
function NewSchedule({ w, onClose, onSaved }: { w: Workflow; onClose: () => void; onSaved: () => void }): JSX.Element {
  const [cron, setCron] = useState('');
  const [timezone, setTimezone] = useState('');
  const [externalId, setExternalId] = useState('');
  const [tags, setTags] = useState('');
  const [draft, setDraft] = useState<JsonDraft>(jsonDraft({}));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const submit = async (ev: Event) => {
    ev.preventDefault();
    if (!cron.trim() || !draft.valid) return;
    setBusy(true);
    setError(undefined);
    try {
      const tagList = splitTags(tags);
      await send('POST', '/schedules', {
        app: w.app,
        workflow: w.name,
        cron: cron.trim(),
        ...(timezone.trim() ? { timezone: timezone.trim() } : {}),
        ...(externalId.trim() ? { externalId: externalId.trim() } : {}),
        ...(tagList.length ? { tags: tagList } : {}),
        data: draft.value,
      });
      toast(`Schedule saved: each tick starts a run of ${w.name}`);
      onSaved();
      onClose();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  return (
    <Modal title={`New schedule for ${w.name}`} onClose={onClose} wide>
      <form onSubmit={submit}>
        <div class="grid2">
          <div class="field">
            <label for="sc-cron">Cron pattern</label>
            <input id="sc-cron" class="mono" required value={cron} maxLength={256} placeholder="0 9 * * *" onInput={(e) => setCron((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="sc-tz">Timezone <span class="muted">(optional: UTC)</span></label>
            <input id="sc-tz" value={timezone} maxLength={64} placeholder="Europe/Paris" onInput={(e) => setTimezone((e.target as HTMLInputElement).value)} />
          </div>
        </div>
        <div class="grid2">
          <div class="field">
            <label for="sc-ext">External id <span class="muted">(optional: saving again with it replaces that schedule)</span></label>
            <input id="sc-ext" value={externalId} maxLength={256} placeholder="tenant-42" onInput={(e) => setExternalId((e.target as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="sc-tags">Tags <span class="muted">(optional: comma-separated, given to the runs it starts)</span></label>
            <input id="sc-tags" value={tags} placeholder="tenant:acme, nightly" onInput={(e) => setTags((e.target as HTMLInputElement).value)} />
          </div>
        </div>
        <JsonEditor id="sc-data" label="Data (handed to each run as event.data.data)" draft={draft} onChange={setDraft} rows={6} />
        {error && <div class="field-error" role="alert">{error}</div>}
        <div class="modal-foot">
          <button type="button" class="btn" onClick={onClose}>Cancel</button>
          <button type="submit" class="btn btn-primary" disabled={busy || !draft.valid || !cron.trim()}>
            {busy ? 'Saving…' : 'Save schedule'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

/** A retry policy in words: `{ maxAttempts: 3 }` is "up to 3 attempts per step". */
function retryText(retry: unknown): string {
  const max = (retry as { maxAttempts?: number } | undefined)?.maxAttempts;
  if (typeof max !== 'number' || max <= 1) return 'None: a failing step fails the run';
  return `Up to ${max} attempts per step`;
}

/** A workflow's singleton in words: one active run per key, and what a new one does meanwhile. */
function singletonText(w: Workflow): string | undefined {
  const sg = w.singleton as { key?: string; mode?: string } | undefined;
  if (!sg || typeof sg !== 'object') return undefined;
  const per = sg.key ? ` per ${sg.key}` : '';
  if (sg.mode === 'queue') return `One run at a time${per}, from start to end: the others wait their turn`;
  if (sg.mode === 'cancel') return `One active run${per}: a new one cancels it`;
  return `One active run${per}: new ones are skipped meanwhile`;
}

/**
 * A workflow's concurrency limits in words, when it registered any (a number,
 * one constraint or two, an env-scoped key shared across workflows; the rest
 * is in its definition below).
 */
function limitText(w: Workflow): string | undefined {
  type Limit = { limit?: number; key?: string; scope?: string };
  const raw = w.concurrency as number | Limit | Limit[] | undefined;
  const list: Limit[] = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map((c) => (typeof c === 'number' ? { limit: c } : c));
  const parts = list
    .filter((c) => c?.limit)
    .map((c) => `${c.limit} ${c.limit === 1 ? 'run' : 'runs'} at a time${c.key ? ` per ${c.key}` : ''}${c.scope === 'env' ? ' (shared by the workspace\'s workflows)' : ''}`);
  return parts.length ? parts.join(', and ') : undefined;
}
