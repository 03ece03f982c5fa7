import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { get, send, session } from '../api';
import { Link } from '../router';
import type { Runner, Schedule, Workflow } from '../types';
import { Badge, Empty, ErrorBox, JsonView, PageHead, Spinner, Time, errorText, toast, useAsync } from '../ui';

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

/** Registered workflows: triggers, cron schedules (registered and made through the API), retry policy and the declared step manifest; each can be paused and resumed. */
export function WorkflowsPage(): JSX.Element {
  const list = useAsync(() => get<Workflow[]>('/workflows'), []);
  const schedules = useAsync(() => get<Schedule[]>('/schedules?limit=1000'), []);
  const [busy, setBusy] = useState<string>();
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
  const toggle = async (w: Workflow) => {
    const action = w.paused ? 'resume' : 'pause';
    setBusy(`${w.app}/${w.name}`);
    try {
      await send('POST', `/workflows/${action}`, { app: w.app, workflow: w.name });
      toast(w.paused ? `${w.name} resumed: its events start runs again` : `${w.name} paused: its events start no run until resumed`);
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
                  <button class="btn btn-sm" disabled={busy === `${w.app}/${w.name}`} onClick={() => void toggle(w)}>
                    {w.paused ? 'Resume' : 'Pause'}
                  </button>
                )}
                <Link class="btn btn-sm" href={`/runs?workflow=${encodeURIComponent(w.name)}${w.app ? `&app=${encodeURIComponent(w.app)}` : ''}`}>Runs →</Link>
              </div>
            </header>
            {w.paused && (
              <p class="small muted">
                Paused by {w.paused.by} <Time at={w.paused.at} />: its events and cron ticks start no run until it is resumed; runs under way go on.
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
              {scheduleOf(w).length > 0 && (
                <>
                  <div>API schedules</div>
                  <ul class="plain" data-testid="api-schedules">
                    {scheduleOf(w).map((sc) => (
                      <li key={sc.id} data-schedule={sc.id}>
                        <code>{sc.cron}</code>
                        {sc.timezone !== 'UTC' && !sc.cron.startsWith('TZ=') && <span class="muted small"> {sc.timezone}</span>}
                        {sc.externalId && <span class="tag">{sc.externalId}</span>}
                        <span class="muted small"> next <Time at={sc.nextRunAt} /></span>
                        {session()?.canWrite && (
                          <button class="btn-icon" title="Delete this schedule" aria-label={`Delete schedule ${sc.externalId ?? sc.id}`} disabled={busy === sc.id} onClick={() => void remove(sc)}>
                            ✕
                          </button>
                        )}
                      </li>
                    ))}
                  </ul>
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
    </div>
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
