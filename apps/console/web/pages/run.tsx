import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, send, session, stream } from '../api';
import { Link, navigate } from '../router';
import { TERMINAL, type ControlAction, type LogLine, type RunDetail, type Step, type WaitingFor } from '../types';
import {
  Badge,
  Confirm,
  Copy,
  dur,
  Empty,
  ErrorBox,
  JsonEditor,
  jsonDraft,
  JsonView,
  LiveDot,
  RunLink,
  Spinner,
  Tabs,
  TagChips,
  Time,
  toast,
  useAsync,
  useThrottle,
  useTick,
  type JsonDraft,
} from '../ui';

type Tab = 'timeline' | 'logs' | 'data' | 'audit';
type Action = 'cancel' | 'pause' | 'resume' | 'replay' | 'retry';

/**
 * One run: what it waits for, the step waterfall, logs, input and result,
 * control actions with confirmation, and its control audit. The timeline
 * stream (GET /v1/runs/{id}/stream) drives every live update.
 */
export function RunPage({ id }: { id: string }): JSX.Element {
  const enc = encodeURIComponent(id);
  const run = useAsync(() => get<RunDetail>(`/runs/${enc}`), [id]);
  const steps = useAsync(() => get<Step[]>(`/runs/${enc}/steps`), [id]);
  const audit = useAsync(() => get<ControlAction[]>(`/control-actions?runId=${enc}`), [id]);
  const [logs, setLogs] = useState<LogLine[]>([]);
  const [live, setLive] = useState(false);
  const [tab, setTab] = useState<Tab>('timeline');
  const [action, setAction] = useState<Action>();

  const refresh = useThrottle(() => {
    run.reload();
    steps.reload();
  }, 250);
  useEffect(() => {
    setLogs([]);
    const ctl = new AbortController();
    stream(
      `/runs/${enc}/stream`,
      (f) => {
        const d = f.data as LogLine & { kind: string; status?: string };
        if (d.kind === 'log') {
          setLogs((l) => (l.length && l[l.length - 1]!.seq >= d.seq ? l : [...l.slice(-4999), d]));
        } else refresh();
      },
      // The run stream ends once the run is terminal; a control action (replay is a new run) reopens nothing here.
      { signal: ctl.signal, onState: setLive, reconnect: false },
    );
    return () => ctl.abort();
  }, [id]);

  if (run.error && !run.data) return <div class="page"><ErrorBox error={run.error} retry={run.reload} /></div>;
  if (!run.data) return <div class="page"><Spinner label="Loading run" /></div>;
  const r = run.data;
  const terminal = TERMINAL.has(r.status);
  const canWrite = session()?.canWrite;
  const after = () => {
    run.reload();
    steps.reload();
    audit.reload();
  };

  return (
    <div class="page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href="/runs">Runs</Link> <span aria-hidden="true">/</span> <span class="mono">{r.id}</span>
      </nav>
      <header class="run-head">
        <div>
          <div class="run-title">
            <h1>{r.workflow}</h1>
            <Badge testId="run-status" status={r.needsAttention && r.status === 'waiting' ? 'needs_attention' : r.status} />
            {!terminal && <LiveDot live={live} />}
          </div>
          <div class="meta">
            <span class="mono">{r.id}</span>
            <Copy text={r.id} label="run id" />
            <span>app <strong>{r.app}</strong></span>
            {r.runner && <span>runner <strong class="mono">{r.runner}</strong></span>}
            <span>
              {r.eventName ? (
                <>
                  event <Link class="link mono" href={`/runs?eventId=${encodeURIComponent(r.eventId ?? '')}`} title="Every run this event started">{r.eventName}</Link>
                </>
              ) : (
                <>trigger <strong>{r.triggerKind}</strong></>
              )}
            </span>
            {r.replayOf && (
              <span>
                replay of <RunLink id={r.replayOf} />
              </span>
            )}
            <span>attempt {r.attempt}</span>
            {r.tags.length > 0 && (
              <span data-testid="run-tags">
                tags <TagChips tags={r.tags} />
              </span>
            )}
          </div>
        </div>
        {canWrite && (
          <div class="page-actions">
            {!terminal && r.status !== 'paused' && <button class="btn" onClick={() => setAction('pause')}>Pause</button>}
            {r.status === 'paused' && <button class="btn btn-primary" onClick={() => setAction('resume')}>Resume</button>}
            {!terminal && <button class="btn btn-danger-outline" onClick={() => setAction('cancel')}>Cancel run</button>}
            {terminal && <button class="btn" onClick={() => setAction('retry')}>Retry from step…</button>}
            {terminal && <button class="btn btn-primary" onClick={() => setAction('replay')}>Replay…</button>}
          </div>
        )}
      </header>

      <section class="facts">
        <Fact label="Created"><Time at={r.createdAt} /></Fact>
        <Fact label="Started"><Time at={r.startedAt} /></Fact>
        <Fact label="Ended"><Time at={r.endedAt} /></Fact>
        <Fact label="Duration">{terminal ? dur(r.durationMs) : r.startedAt ? <Running since={r.startedAt} /> : '—'}</Fact>
        <Fact label="Steps">{r.stepCount}</Fact>
        {r.usage && <Fact label="Model calls">{`${r.usage.calls} · ${r.usage.tokensIn + r.usage.tokensOut} tokens`}</Fact>}
        {r.session && <Fact label="Session"><span class="mono">{r.session}</span></Fact>}
      </section>

      {!terminal && r.waitingFor && <WaitingCallout w={r.waitingFor} runId={r.id} status={r.status} />}
      {r.status === 'failed' && r.error && (
        <div class="callout callout-bad" role="alert">
          <div class="callout-title">Failed: {r.error.message}</div>
          {r.error.stack && (
            <details>
              <summary class="small muted">Stack trace</summary>
              <pre class="stack">{r.error.stack}</pre>
            </details>
          )}
        </div>
      )}
      {r.status === 'cancelled' && <CancelledCallout run={r} audit={audit.data} />}

      <Tabs
        label="Run sections"
        value={tab}
        onChange={setTab}
        tabs={[
          { id: 'timeline', label: `Timeline (${steps.data?.length ?? 0})` },
          { id: 'logs', label: `Logs (${logs.length})` },
          { id: 'data', label: 'Input & result' },
          { id: 'audit', label: `Audit (${audit.data?.length ?? 0})` },
        ]}
      />
      <div class="card tab-panel" role="tabpanel">
        {tab === 'timeline' && (steps.error ? <ErrorBox error={steps.error} retry={steps.reload} /> : steps.data ? <Waterfall run={r} steps={steps.data} /> : <Spinner />)}
        {tab === 'logs' && <Logs logs={logs} />}
        {tab === 'data' && (
          <div class="grid2">
            <div>
              <h3>Input</h3>
              <JsonView value={r.input} />
            </div>
            <div>
              <h3>Result</h3>
              <JsonView value={r.result} empty={terminal ? 'null' : 'Not finished yet'} />
            </div>
          </div>
        )}
        {tab === 'audit' && <Audit entries={audit.data} />}
      </div>

      {action === 'cancel' && (
        <Confirm
          title="Cancel this run?"
          danger
          confirm="Cancel run"
          dismiss="Keep it running"
          body={<p>The run stops for good; steps in flight are cancelled. You can replay it afterwards.</p>}
          onClose={() => setAction(undefined)}
          onConfirm={async () => {
            await send('POST', `/runs/${enc}/cancel`);
            toast('Run cancelled');
            after();
          }}
        />
      )}
      {action === 'pause' && (
        <Confirm
          title="Pause this run?"
          confirm="Pause"
          body={<p>The step in flight finishes and is saved, then the run stops until you resume it.</p>}
          onClose={() => setAction(undefined)}
          onConfirm={async () => {
            await send('POST', `/runs/${enc}/pause`);
            toast('Pause requested');
            after();
          }}
        />
      )}
      {action === 'resume' && (
        <Confirm
          title="Resume this run?"
          confirm="Resume"
          body={<p>The run is queued again and continues from its next step; completed steps are not run again.</p>}
          onClose={() => setAction(undefined)}
          onConfirm={async () => {
            await send('POST', `/runs/${enc}/resume`);
            toast('Run resumed');
            after();
          }}
        />
      )}
      {action === 'replay' && <ReplayDialog run={r} onClose={() => setAction(undefined)} />}
      {action === 'retry' && steps.data && <RetryDialog run={r} steps={steps.data} onClose={() => setAction(undefined)} />}
    </div>
  );
}

/**
 * Who cancelled the run and when, from its control audit (the run read itself
 * does not say); for a cancel by an event (cancelOn), a timeout or a bulk
 * cancel, the run's error says why, where the audit's actor would name only a
 * key or the system.
 */
function CancelledCallout({ run, audit }: { run: RunDetail; audit: ControlAction[] | undefined }): JSX.Element {
  const entry = audit?.find((a) => a.action === 'cancel');
  const d = entry?.detail as { cancelOn?: unknown; timeout?: unknown; bulkCancel?: unknown } | undefined;
  const why = d && (d.cancelOn || d.timeout || d.bulkCancel) ? run.error?.message : undefined;
  return (
    <div class="callout callout-mute" data-testid="cancelled">
      <div class="callout-title">Cancelled</div>
      <div class="callout-body">
        {why ? <>{why} </> : entry?.actor ? <>By <strong>{entry.actor}</strong> </> : 'This run was cancelled '}
        <Time at={entry?.createdAt ?? run.endedAt} />. Its finished steps keep their results; replay it to run it again.
      </div>
    </div>
  );
}

function Fact({ label, children }: { label: string; children: ComponentChildren }): JSX.Element {
  return (
    <div class="fact">
      <div class="fact-label">{label}</div>
      <div class="fact-value">{children}</div>
    </div>
  );
}

function Running({ since }: { since: string }): JSX.Element {
  useTick(1000);
  return <span>{dur(Date.now() - Date.parse(since))}</span>;
}

/** "Why is it not moving?": the run read's waitingFor, in words, with links. */
export function WaitingCallout({ w, runId, status }: { w: WaitingFor; runId: string; status?: string }): JSX.Element {
  useTick(5000);
  let title: string;
  let body: JSX.Element | string | undefined;
  let tone = 'wait';
  switch (w.kind) {
    case 'sleep':
      title = `Sleeping until ${new Date(w.until).toLocaleString()}`;
      body = <>Step <strong>{w.step}</strong> wakes <Time at={w.until} />.</>;
      break;
    case 'event':
      title = `Waiting for event “${w.event}”`;
      body = (
        <>
          Step <strong>{w.step}</strong>
          {w.if && <> resumes on an event matching <code>{w.if}</code></>}
          {w.timeoutAt ? <>; times out <Time at={w.timeoutAt} />.</> : '; no timeout.'}{' '}
          <Link class="link" href={`/events?send=${encodeURIComponent(w.event)}`}>Send it…</Link>
        </>
      );
      break;
    case 'approval':
      title = 'Parked on an approval';
      tone = 'warn';
      body = (
        <>
          Step <strong>{w.step}</strong> needs a person’s sign-off{w.expiresAt && <> (expires <Time at={w.expiresAt} />)</>}.{' '}
          <Link class="link" href={`/approvals?runId=${encodeURIComponent(runId)}`}>Open the approval →</Link>
        </>
      );
      break;
    case 'child':
      title = `Waiting for a child run${w.workflow ? ` of ${w.workflow}` : ''}`;
      body = <>Step <strong>{w.step}</strong> resumes when {w.childRunId ? <RunLink id={w.childRunId} /> : 'the child run'} ends.</>;
      break;
    case 'model':
      title = 'Waiting for a model call';
      body = <>Step <strong>{w.step}</strong>: the service is calling the model provider.</>;
      break;
    case 'concurrency':
      // Queued before its first step, or due again after a sleep or a wait that gave its slot back.
      title = status === 'queued' || status === undefined ? 'Queued behind a concurrency limit' : 'Waiting for a concurrency slot';
      body = (
        <>
          {w.key ? <>Key <code>{w.key}</code> allows</> : 'The workflow allows'} {w.limit} {w.limit === 1 ? 'run' : 'runs'} executing at once; {w.holding}{' '}
          {w.holding === 1 ? 'run holds' : 'runs hold'} {w.limit === 1 ? 'it' : 'a slot'}. This one goes on when one of them ends or parks (a sleep, a wait).
        </>
      );
      break;
    case 'singleton':
      title = 'Queued behind the active run of its key';
      body = (
        <>
          One run at a time {w.key ? <>per key, here <code>{w.key}</code></> : 'of this workflow'}, from its start to its end: this one starts when{' '}
          {w.activeRunId ? <RunLink id={w.activeRunId} /> : 'the active run'} ends.
        </>
      );
      break;
    case 'throttle':
      title = 'Throttled';
      body = <>The workflow’s throttle lets it start <Time at={w.until} />.</>;
      break;
    case 'no_runner':
      title = 'No live runner can take it';
      tone = 'bad';
      body = (
        <>
          No runner {w.runner ? <>with id <code>{w.runner}</code></> : 'of its app'} has been live since <Time at={w.since} />; it fails <Time at={w.failsAt} /> unless one registers.{' '}
          <Link class="link" href="/runners">Runners →</Link>
        </>
      );
      break;
    case 'paused':
      title = 'Paused';
      tone = 'warn';
      body = <>{w.by ? <>Paused by <strong>{w.by}</strong> </> : 'Paused '}{w.since && <Time at={w.since} />}. Resume it to continue.</>;
      break;
    case 'retry':
      title = `Backing off before retry ${w.attempt + 1}`;
      tone = 'warn';
      body = <>Step <strong>{w.step}</strong> failed attempt {w.attempt}{w.error && <>: <em>{w.error.message}</em></>}. Next try {w.nextTryAt ? <Time at={w.nextTryAt} /> : 'soon'}.</>;
      break;
    case 'transport_retry':
      title = 'Retrying after runner errors';
      tone = 'warn';
      body = <>{w.failures} call{w.failures === 1 ? '' : 's'} to the runner failed; next try {w.nextTryAt ? <Time at={w.nextTryAt} /> : 'soon'}.</>;
      break;
    case 'scheduler':
      title = 'Queued for a scheduler';
      body = <>Waiting for a scheduler replica with room{w.since && <> since <Time at={w.since} /></>}.</>;
      break;
    case 'running':
      title = 'Running';
      tone = 'run';
      body = w.step ? <>Working on step <strong>{w.step}</strong>.</> : 'The runner is executing its next step.';
      break;
  }
  return (
    <div class={`callout callout-${tone}`} data-waiting={w.kind}>
      <div class="callout-kicker">{w.kind === 'running' ? 'What is it doing?' : 'Why is it not moving?'}</div>
      <div class="callout-title">{title}</div>
      {body && <div class="callout-body">{body}</div>}
    </div>
  );
}

/** Steps as a waterfall over the run's time span, each row opening its attempts, error, input and output. */
function Waterfall({ run, steps }: { run: RunDetail; steps: Step[] }): JSX.Element {
  useTick(1000);
  const [open, setOpen] = useState<string>();
  const ordered = useMemo(() => [...steps].sort((a, b) => a.index - b.index || a.startedAt.localeCompare(b.startedAt)), [steps]);
  if (ordered.length === 0) return <Empty title="No steps yet">{TERMINAL.has(run.status) ? 'The run finished without steps.' : 'Steps appear here as the run reports them.'}</Empty>;
  const t0 = Math.min(Date.parse(run.startedAt ?? run.createdAt), ...ordered.map((s) => Date.parse(s.startedAt)));
  const end = (s: Step) => (s.endedAt ? Date.parse(s.endedAt) : Date.now());
  const t1 = Math.max(run.endedAt ? Date.parse(run.endedAt) : Date.now(), ...ordered.map(end), t0 + 1);
  const span = t1 - t0;
  return (
    <div class="waterfall" role="list">
      <div class="wf-scale" aria-hidden="true">
        <span>0</span>
        <span>{dur(span / 2)}</span>
        <span>{dur(span)}</span>
      </div>
      {ordered.map((s) => {
        const a = Date.parse(s.startedAt);
        const left = ((a - t0) / span) * 100;
        const width = Math.max(0.6, ((end(s) - a) / span) * 100);
        const isOpen = open === s.id;
        return (
          <div key={s.id} class={`wf-row ${isOpen ? 'open' : ''}`} role="listitem" data-step={s.name}>
            <button class="wf-head" aria-expanded={isOpen} onClick={() => setOpen(isOpen ? undefined : s.id)}>
              <span class="wf-name">
                <span class="caret" aria-hidden="true">{isOpen ? '▾' : '▸'}</span>
                <span class="strong">{s.name}</span>
                <span class="op">{s.op}</span>
              </span>
              <span class="wf-status">
                <Badge status={s.status} />
                {s.attempts > 1 && <span class="tag">{s.attempts} attempts</span>}
              </span>
              <span class="wf-track">
                <span class={`wf-bar bar-${s.status}`} style={{ left: `${left}%`, width: `${Math.min(width, 100 - left)}%` }} />
              </span>
              <span class="wf-dur num">{s.endedAt ? dur(end(s) - a) : s.status === 'sleeping' || s.status === 'waiting' || s.status === 'child' ? 'parked' : dur(end(s) - a)}</span>
            </button>
            {isOpen && (
              <div class="wf-detail">
                <div class="kv">
                  <div>Started</div>
                  <div>{new Date(s.startedAt).toLocaleString()}</div>
                  <div>Ended</div>
                  <div>{s.endedAt ? new Date(s.endedAt).toLocaleString() : '—'}</div>
                  <div>Attempts</div>
                  <div>{s.attempts}</div>
                  <div>Step id</div>
                  <div class="mono small">{s.id}</div>
                  {(s as Step & { childRunId?: string }).childRunId && (
                    <>
                      <div>Child run</div>
                      <div>
                        <RunLink id={(s as Step & { childRunId?: string }).childRunId!} />
                      </div>
                    </>
                  )}
                  {s.usage && (
                    <>
                      <div>Model</div>
                      <div>{Object.entries(s.usage).map(([k, v]) => `${k}: ${String(v)}`).join(' · ')}</div>
                    </>
                  )}
                </div>
                {s.error && (
                  <div class="callout callout-bad">
                    <div class="callout-title">{s.error.message}</div>
                    {s.error.stack && (
                      <details>
                        <summary class="small muted">Stack trace</summary>
                        <pre class="stack">{s.error.stack}</pre>
                      </details>
                    )}
                  </div>
                )}
                <div class="grid2">
                  {s.input !== undefined && (
                    <div>
                      <h4>Input</h4>
                      <JsonView value={s.input} />
                    </div>
                  )}
                  <div>
                    <h4>Output</h4>
                    <JsonView value={s.output} empty={s.endedAt ? 'null' : 'pending'} />
                  </div>
                </div>
              </div>
            )}
          </div>
        );
      })}
    </div>
  );
}

function Logs({ logs }: { logs: LogLine[] }): JSX.Element {
  const [level, setLevel] = useState('');
  const [q, setQ] = useState('');
  const rank = { debug: 0, info: 1, warn: 2, error: 3 } as const;
  const shown = logs.filter((l) => (!level || rank[l.level] >= rank[level as keyof typeof rank]) && (!q || `${l.message} ${l.scope} ${JSON.stringify(l.fields ?? {})}`.toLowerCase().includes(q.toLowerCase())));
  return (
    <div>
      <div class="toolbar">
        <label class="filter">
          <span>Level</span>
          <select value={level} onChange={(e) => setLevel((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            <option value="info">info and up</option>
            <option value="warn">warn and up</option>
            <option value="error">error</option>
          </select>
        </label>
        <input type="search" aria-label="Filter logs" placeholder="Filter logs…" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
      </div>
      {shown.length === 0 ? (
        <Empty title="No log lines">{logs.length ? 'None match the filter.' : 'Lines the workflow logs appear here live.'}</Empty>
      ) : (
        <div class="logs" role="log">
          {shown.map((l) => (
            <div key={l.seq} class={`log log-${l.level}`}>
              <span class="log-ts mono">{new Date(l.ts).toLocaleTimeString()}</span>
              <span class={`log-level lv-${l.level}`}>{l.level}</span>
              <span class="log-scope mono" title={`attempt ${l.attempt}`}>{l.scope}</span>
              <span class="log-msg">
                {l.message}
                {l.fields &&
                  Object.entries(l.fields).map(([k, v]) => (
                    <span key={k} class="log-field">
                      {k}=<span class="mono">{typeof v === 'string' ? v : JSON.stringify(v)}</span>
                    </span>
                  ))}
              </span>
            </div>
          ))}
        </div>
      )}
    </div>
  );
}

function Audit({ entries }: { entries: ControlAction[] | undefined }): JSX.Element {
  if (!entries) return <Spinner />;
  if (entries.length === 0) return <Empty title="No control actions">Cancels, pauses, resumes, replays and retries of this run are recorded here with who made them.</Empty>;
  return (
    <table class="table">
      <thead>
        <tr>
          <th>When</th>
          <th>Action</th>
          <th>By</th>
          <th>New run</th>
          <th>Detail</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((a) => (
          <tr key={a.id}>
            <td><Time at={a.createdAt} /></td>
            <td><span class="tag">{a.action.replace(/_/g, ' ')}</span></td>
            <td>{a.actor ?? '—'}</td>
            <td>{a.newRunId ? <RunLink id={a.newRunId} /> : '—'}</td>
            <td class="mono small">{a.detail !== undefined ? JSON.stringify(a.detail) : ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ReplayDialog({ run, onClose }: { run: RunDetail; onClose: () => void }): JSX.Element {
  const [draft, setDraft] = useState<JsonDraft>(jsonDraft(run.input));
  return (
    <Confirm
      title="Replay as a new run"
      confirm="Replay"
      disabled={!draft.valid}
      onClose={onClose}
      onConfirm={async () => {
        const created = await send<{ id: string }>('POST', `/runs/${encodeURIComponent(run.id)}/replay`, { input: draft.value });
        toast('Replay started');
        if (created) navigate(`/runs/${created.id}`);
      }}
      body={
        <>
          <p class="muted">A new run of <strong>{run.workflow}</strong> starts from the top with this input; the original stays as it is.</p>
          <JsonEditor id="replay-input" label="Input" draft={draft} onChange={setDraft} rows={12} />
        </>
      }
    />
  );
}

function RetryDialog({ run, steps, onClose }: { run: RunDetail; steps: Step[]; onClose: () => void }): JSX.Element {
  const named = [...steps].sort((a, b) => a.index - b.index);
  const firstBad = named.find((s) => s.status === 'failed') ?? named[named.length - 1];
  const [step, setStep] = useState(firstBad?.name ?? '');
  return (
    <Confirm
      title="Retry from a step"
      confirm="Retry from this step"
      disabled={!step}
      onClose={onClose}
      onConfirm={async () => {
        const created = await send<{ id: string }>('POST', `/runs/${encodeURIComponent(run.id)}/retry-from-step`, { step });
        toast(`Retrying from ${step}`);
        if (created) navigate(`/runs/${created.id}`);
      }}
      body={
        <>
          <p class="muted">A new run keeps the results of the steps before the chosen one and runs again from it.</p>
          {named.length === 0 ? (
            <p>This run has no steps to retry from.</p>
          ) : (
            <div class="field">
              <label for="retry-step">Step</label>
              <select id="retry-step" value={step} onChange={(e) => setStep((e.target as HTMLSelectElement).value)}>
                {named.map((s) => (
                  <option key={s.id} value={s.name}>
                    {s.index + 1}. {s.name} ({s.status})
                  </option>
                ))}
              </select>
            </div>
          )}
        </>
      }
    />
  );
}
