import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { get, qs, send, session } from '../api';
import { setQuery, useLocation } from '../router';
import type { Approval } from '../types';
import { approvalsChanged, Badge, Confirm, Empty, ErrorBox, JsonEditor, jsonDraft, JsonView, PageHead, RunLink, Spinner, Time, toast, useAsync, type JsonDraft } from '../ui';

const OPEN = new Set(['pending', 'escalated']);
const RISK_ORDER: Record<string, number> = { critical: 0, high: 1, medium: 2, low: 3 };

/**
 * The approvals inbox: open ones first (escalated, then by risk and age),
 * each with its proposed tool call; approve, approve with edited args, deny.
 * Decided ones below, as the audit trail of who decided and through what.
 */
export function ApprovalsPage(): JSX.Element {
  const loc = useLocation();
  const runId = loc.query.get('runId') ?? undefined;
  const list = useAsync(() => get<Approval[]>('/approvals' + qs({ runId, limit: 1000 })), [runId]);
  const [deciding, setDeciding] = useState<{ a: Approval; mode: 'approve' | 'edit' | 'deny' }>();
  const canWrite = session()?.canWrite;

  const open = (list.data ?? [])
    .filter((a) => OPEN.has(a.status))
    .sort((x, y) => (x.status === y.status ? 0 : x.status === 'escalated' ? -1 : 1) || (RISK_ORDER[x.risk ?? ''] ?? 9) - (RISK_ORDER[y.risk ?? ''] ?? 9) || x.requestedAt.localeCompare(y.requestedAt));
  const decided = (list.data ?? []).filter((a) => !OPEN.has(a.status));

  return (
    <div class="page">
      <PageHead title="Approvals" sub="Tool calls waiting for a person’s sign-off, and the decisions made.">
        <button class="btn" onClick={list.reload}>Refresh</button>
      </PageHead>
      {runId && (
        <div class="chip-row">
          <span class="chip">
            run <span class="mono">{runId}</span>
            <button class="btn-icon" aria-label="Show all runs" onClick={() => setQuery({})}>✕</button>
          </span>
        </div>
      )}
      {list.error && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && !list.error && <Spinner label="Loading approvals" />}
      {list.data && (
        <>
          <h2 class="section-title">
            Open <span class="count-pill">{open.length}</span>
          </h2>
          {open.length === 0 ? (
            <div class="card">
              <Empty title="Inbox zero">No run is waiting for a decision{runId ? ' on this run' : ''}.</Empty>
            </div>
          ) : (
            <div class="approval-list">
              {open.map((a) => (
                <article key={a.id} class={`card approval ${a.status === 'escalated' ? 'escalated' : ''}`} data-approval={a.id} aria-label={`Approval for ${a.tool}`}>
                  <header class="approval-head">
                    <div>
                      <div class="approval-tool">
                        <code>{a.tool}</code>
                        {a.risk && <span class={`risk risk-${a.risk}`}>{a.risk} risk</span>}
                        <Badge status={a.status} />
                      </div>
                      {a.summary && <div class="approval-summary">{a.summary}</div>}
                      <div class="meta">
                        <span>{a.workflow}</span>
                        <span>step <strong>{a.step}</strong></span>
                        <RunLink id={a.runId} />
                        <span>requested <Time at={a.requestedAt} /></span>
                        {a.expiresAt && (
                          <span>
                            {a.status === 'escalated' ? 'expired' : 'expires'} <Time at={a.expiresAt} /> → {a.onTimeout}
                            {a.escalatesTo && ` to ${a.escalatesTo}`}
                          </span>
                        )}
                      </div>
                    </div>
                    {canWrite && (
                      <div class="page-actions">
                        <button class="btn btn-danger-outline" onClick={() => setDeciding({ a, mode: 'deny' })} disabled={!a.allow.includes('reject')}>Deny</button>
                        <button class="btn" onClick={() => setDeciding({ a, mode: 'edit' })} disabled={!a.allow.includes('edit')}>Edit & approve</button>
                        <button class="btn btn-primary" onClick={() => setDeciding({ a, mode: 'approve' })} disabled={!a.allow.includes('approve')}>Approve</button>
                      </div>
                    )}
                  </header>
                  <div class="grid2">
                    <div>
                      <h4>Proposed arguments</h4>
                      <JsonView value={a.args} />
                    </div>
                    <div>
                      {a.policy && (
                        <>
                          <h4>Policy</h4>
                          <p>{a.policy}</p>
                        </>
                      )}
                      {a.context && (
                        <>
                          <h4>Context</h4>
                          <p class="pre-wrap">{a.context}</p>
                        </>
                      )}
                      {!a.policy && !a.context && <p class="muted">No policy or context was attached.</p>}
                    </div>
                  </div>
                </article>
              ))}
            </div>
          )}

          <h2 class="section-title">Decided</h2>
          <div class="card table-card">
            {decided.length === 0 ? (
              <Empty title="No decisions yet" />
            ) : (
              <table class="table">
                <thead>
                  <tr>
                    <th>Outcome</th>
                    <th>Tool</th>
                    <th>Run</th>
                    <th>Decided by</th>
                    <th>Via</th>
                    <th>When</th>
                    <th>Edited args</th>
                  </tr>
                </thead>
                <tbody>
                  {decided.map((a) => (
                    <tr key={a.id} data-approval={a.id}>
                      <td><Badge status={a.status} /></td>
                      <td><code>{a.tool}</code></td>
                      <td><RunLink id={a.runId} /></td>
                      <td>{a.decidedBy ?? <span class="muted">—</span>}</td>
                      <td>{a.decidedVia ? <span class="tag">{a.decidedVia}</span> : '—'}</td>
                      <td><Time at={a.decidedAt ?? a.requestedAt} /></td>
                      <td class="mono small">{a.editedArgs !== undefined ? JSON.stringify(a.editedArgs) : ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </div>
        </>
      )}
      {deciding && <Decide a={deciding.a} mode={deciding.mode} onClose={() => setDeciding(undefined)} onDone={list.reload} />}
    </div>
  );
}

function Decide({ a, mode, onClose, onDone }: { a: Approval; mode: 'approve' | 'edit' | 'deny'; onClose: () => void; onDone: () => void }): JSX.Element {
  const [draft, setDraft] = useState<JsonDraft>(jsonDraft(a.args));
  const [response, setResponse] = useState('');
  const title = mode === 'deny' ? `Deny ${a.tool}?` : mode === 'edit' ? `Approve ${a.tool} with edited arguments` : `Approve ${a.tool}?`;
  return (
    <Confirm
      title={title}
      danger={mode === 'deny'}
      confirm={mode === 'deny' ? 'Deny' : 'Approve'}
      disabled={mode === 'edit' && !draft.valid}
      onClose={onClose}
      onConfirm={async () => {
        const body: Record<string, unknown> = { status: mode === 'deny' ? 'denied' : 'approved' };
        if (mode === 'edit') body.args = draft.value;
        if (response.trim()) body.response = response.trim();
        await send('POST', `/approvals/${encodeURIComponent(a.id)}/decision`, body);
        toast(mode === 'deny' ? `Denied ${a.tool}` : `Approved ${a.tool}`);
        approvalsChanged();
        onDone();
      }}
      body={
        <>
          <p class="muted">
            The run <span class="mono">{a.runId}</span> resumes with your decision, recorded as made by <strong>{session()?.actor || 'this key'}</strong>.
          </p>
          {mode === 'edit' ? (
            <>
              <JsonEditor id="edit-args" label="Arguments" draft={draft} onChange={setDraft} rows={10} />
              <ArgChanges before={a.args} after={draft.valid ? draft.value : undefined} />
            </>
          ) : (
            <JsonView value={a.args} />
          )}
          {a.allow.includes('respond') && (
            <div class="field">
              <label for="decision-response">Response <span class="muted">(optional, sent to the workflow)</span></label>
              <textarea id="decision-response" rows={2} value={response} onInput={(e) => setResponse((e.target as HTMLTextAreaElement).value)} />
            </div>
          )}
        </>
      }
    />
  );
}

const show = (v: unknown) => (v === undefined ? '(none)' : JSON.stringify(v));

/** What the edit changes, field by field (top level), so a reviewer sees "amount 180 → 40" before approving. */
function ArgChanges({ before, after }: { before: unknown; after: unknown }): JSX.Element | null {
  if (after === undefined) return null;
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const rows: [string, unknown, unknown][] = [];
  if (isObj(before) && isObj(after)) {
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
      if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) rows.push([k, before[k], after[k]]);
    }
  } else if (JSON.stringify(before) !== JSON.stringify(after)) rows.push(['value', before, after]);
  if (rows.length === 0) return <p class="hint">No change from the proposed arguments yet.</p>;
  return (
    <div class="changes" data-testid="arg-changes">
      <h4>Your changes</h4>
      <ul class="plain">
        {rows.map(([k, b, a]) => (
          <li key={k}>
            <code>{k}</code> <span class="del mono">{show(b)}</span> → <span class="ins mono">{show(a)}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
