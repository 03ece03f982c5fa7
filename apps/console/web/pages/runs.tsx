import type { JSX } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { get, page, qs, send, session, stream, type Page } from '../api';
import { navigate, setQuery, useLocation } from '../router';
import { RUN_STATUSES, type Run, type RunStats, type RunStatus } from '../types';
import { Badge, Confirm, dur, Empty, ErrorBox, LiveDot, num, PageHead, RunLink, splitTags, Spinner, TagChips, Time, toast, useAsync, useThrottle, withTags } from '../ui';

const SORTS = ['started', 'workflow', 'status', 'app', 'duration'] as const;
const SINCE: Record<string, number> = { '15m': 15 * 60e3, '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };
const FILTERS = ['q', 'deep', 'status', 'app', 'workflow', 'runType', 'eventId', 'replayOf', 'since', 'sort', 'dir'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

const sinceIso = (v: string | undefined) => (v && SINCE[v] ? new Date(Date.now() - SINCE[v]!).toISOString() : undefined);
/** GET /v1/runs takes at most 10 tags, each 1-128 characters. */
const MAX_TAGS = 10;

/**
 * Runs: the stats header, every filter, sort and search of GET /v1/runs
 * (deep search included) in the URL, keyset pages (never more than one page
 * of runs in memory), and live status changes from GET /v1/runs/stream.
 */
export function RunsPage(): JSX.Element {
  const loc = useLocation();
  const f: Filters = {};
  for (const k of FILTERS) f[k] = loc.query.get(k) ?? undefined;
  const tags = loc.query.getAll('tag');
  const key = [...FILTERS.map((k) => f[k] ?? ''), ...tags].join('|');
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [limit, setLimit] = useState(50);
  useEffect(() => setCursors([undefined]), [key, limit]);
  const cursor = cursors[cursors.length - 1];
  const sort = (f.sort as (typeof SORTS)[number]) ?? 'started';
  const dir = f.dir === 'asc' ? 'asc' : 'desc';

  const runs = useAsync<Page<Run>>(
    () =>
      page<Run>(
        '/runs' +
          withTags({ q: f.q, deep: f.deep === '1' && f.q ? '1' : undefined, status: f.status, app: f.app, workflow: f.workflow, runType: f.runType, eventId: f.eventId, replayOf: f.replayOf, since: sinceIso(f.since), sort, dir, limit, cursor }, tags),
      ),
    [key, cursor, limit],
  );
  const stats = useAsync<RunStats>(() => get<RunStats>('/runs/stats' + qs({ app: f.app, since: sinceIso(f.since) })), [f.app, f.since]);

  // Live: patch the status of rows on screen; on the first page, new runs refetch it (throttled).
  const [patch, setPatch] = useState<Record<string, string>>({});
  const [live, setLive] = useState(false);
  useEffect(() => setPatch({}), [runs.data]);
  const refetchPage = useThrottle(runs.reload, 1000);
  const refetchStats = useThrottle(stats.reload, 2000);
  const onScreen = useRef(new Set<string>());
  onScreen.current = new Set(runs.data?.items.map((r) => r.id));
  const firstPage = cursors.length === 1;
  const firstRef = useRef(firstPage);
  firstRef.current = firstPage;
  useEffect(() => {
    const ctl = new AbortController();
    stream(
      '/runs/stream',
      (fr) => {
        const d = fr.data as { runId?: string; status?: string };
        if (!d.runId || !d.status) return;
        if (onScreen.current.has(d.runId)) setPatch((p) => ({ ...p, [d.runId!]: d.status! }));
        else if (firstRef.current) refetchPage();
        refetchStats();
      },
      { signal: ctl.signal, onState: setLive },
    );
    return () => ctl.abort();
  }, []);
  // The stream is best-effort and says nothing while a run waits its turn (a concurrency limit, a throttle):
  // the first page also refreshes itself every few seconds while the tab is visible.
  useEffect(() => {
    const t = setInterval(() => {
      if (document.visibilityState !== 'visible' || !firstRef.current) return;
      refetchPage();
      refetchStats();
    }, 5000);
    return () => clearInterval(t);
  }, []);

  const set = (patchF: Filters, nextTags = tags) => navigate(location.pathname + withTags({ ...f, ...patchF }, nextTags), { replace: true });
  const addTag = (t: string) => !tags.includes(t) && tags.length < MAX_TAGS && set({}, [...tags, t]);
  const [qDraft, setQDraft] = useState(f.q ?? '');
  useEffect(() => setQDraft(f.q ?? ''), [f.q]);
  const [bulk, setBulk] = useState<BulkKind>();
  const canWrite = session()?.canWrite;

  const header = (col: (typeof SORTS)[number], label: string) => {
    const active = sort === col;
    return (
      <th aria-sort={active ? (dir === 'asc' ? 'ascending' : 'descending') : 'none'}>
        <button class={`th-sort ${active ? 'active' : ''}`} onClick={() => set({ sort: col === 'started' ? undefined : col, dir: active && dir === 'desc' ? 'asc' : undefined })}>
          {label}
          <span aria-hidden="true">{active ? (dir === 'asc' ? ' ↑' : ' ↓') : ''}</span>
        </button>
      </th>
    );
  };

  const anyFilter = tags.length > 0 || FILTERS.some((k) => k !== 'sort' && k !== 'dir' && f[k]);
  return (
    <div class="page">
      <PageHead title="Runs" sub="Every run of the workspace, newest first." >
        <LiveDot live={live} />
        {canWrite && (
          <>
            <button class="btn" onClick={() => setBulk('replay')}>
              Bulk replay…
            </button>
            <button class="btn" onClick={() => setBulk('cancel')}>
              Bulk cancel…
            </button>
          </>
        )}
      </PageHead>

      <section class="stats" aria-label="Run stats">
        <Stat label="Total" value={num(stats.data?.total)} />
        <Stat label="Active" value={num(stats.data?.active)} tone="run" />
        <Stat label="Succeeded" value={num(stats.data?.succeeded)} tone="ok" />
        <Stat label="Failed" value={num(stats.data?.failed)} tone="bad" />
        {/* The API says 100 when nothing has finished; with no finished run there is no rate to show. */}
        {stats.data && stats.data.succeeded + stats.data.failed > 0 ? (
          <Stat label="Success rate" value={`${stats.data.successRate}%`} meter={stats.data.successRate} />
        ) : (
          <Stat label="Success rate" value="—" hint={stats.data ? 'No finished runs yet' : undefined} />
        )}
      </section>

      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          set({ q: qDraft.trim() || undefined });
        }}
      >
        <div class="search">
          <input
            type="search"
            aria-label="Search runs"
            placeholder={f.deep === '1' ? 'Search id, workflow, app, input, result, error…' : 'Search run id, workflow or app…'}
            value={qDraft}
            onInput={(e) => setQDraft((e.target as HTMLInputElement).value)}
          />
          <label class="check" title="Also search run input, result and error (slower)">
            <input type="checkbox" checked={f.deep === '1'} onChange={(e) => set({ deep: (e.target as HTMLInputElement).checked ? '1' : undefined })} />
            Deep
          </label>
          <button class="btn" type="submit">
            Search
          </button>
        </div>
        <div class="filter-row">
          <Select label="Status" value={f.status} onChange={(v) => set({ status: v })} options={RUN_STATUSES.map((s) => [s, s === 'running' ? 'running (+waiting)' : s])} />
          <Select label="Trigger" value={f.runType} onChange={(v) => set({ runType: v })} options={[['event', 'event'], ['cron', 'cron']]} />
          <Select label="Started" value={f.since} onChange={(v) => set({ since: v })} options={Object.keys(SINCE).map((k) => [k, `last ${k}`])} anyLabel="any time" />
          <TextFilter label="App" value={f.app} onChange={(v) => set({ app: v })} />
          <TextFilter label="Workflow" value={f.workflow} onChange={(v) => set({ workflow: v })} />
          <TextFilter label="Event id" value={f.eventId} onChange={(v) => set({ eventId: v })} />
          <TextFilter label="Replay of" value={f.replayOf} onChange={(v) => set({ replayOf: v })} />
          <TagInput full={tags.length >= MAX_TAGS} onAdd={addTag} />
          {anyFilter && (
            <button type="button" class="btn btn-ghost btn-sm" onClick={() => setQuery({ sort: f.sort, dir: f.dir })}>
              Clear filters
            </button>
          )}
        </div>
        {tags.length > 0 && (
          <div class="chip-row" role="group" aria-label="Tag filter">
            {tags.map((t) => (
              <span key={t} class="chip">
                tag <span class="mono">{t}</span>
                <button type="button" class="btn-icon" aria-label={`Remove tag ${t}`} onClick={() => set({}, tags.filter((x) => x !== t))}>
                  ✕
                </button>
              </span>
            ))}
          </div>
        )}
      </form>

      <div class="card table-card">
        {runs.error && <ErrorBox error={runs.error} retry={runs.reload} />}
        {!runs.data && !runs.error && <Spinner label="Loading runs" />}
        {runs.data && runs.data.items.length === 0 && (
          <Empty title={anyFilter ? 'No runs match these filters' : 'No runs yet'}>
            {anyFilter ? 'Try a wider time range or clear the filters.' : 'Send an event whose name matches a workflow trigger to start one.'}
          </Empty>
        )}
        {runs.data && runs.data.items.length > 0 && (
          <table class={`table runs-table ${runs.loading ? 'is-loading' : ''}`}>
            <thead>
              <tr>
                {header('status', 'Status')}
                <th>Run</th>
                {header('workflow', 'Workflow')}
                {header('app', 'App')}
                <th>Trigger</th>
                {header('started', 'Started')}
                {header('duration', 'Duration')}
                <th class="num">Steps</th>
              </tr>
            </thead>
            <tbody>
              {runs.data.items.map((r) => {
                const status = patch[r.id] ?? r.status;
                return (
                  <tr key={r.id} class="row-link" data-run={r.id} onClick={(e) => !(e.target as HTMLElement).closest('a,button') && navigate(`/runs/${r.id}`)}>
                    <td>
                      <Badge status={r.needsAttention && status === 'waiting' ? 'needs_attention' : status} />
                    </td>
                    <td>
                      <RunLink id={r.id} />
                      {r.replayOf && <span class="tag" title={`Replay of ${r.replayOf}`}>replay</span>}
                    </td>
                    <td>
                      <span class="strong">{r.workflow}</span>
                      <TagChips tags={r.tags} onPick={addTag} />
                    </td>
                    <td>{r.app}</td>
                    <td>
                      {r.eventName ? (
                        <span class="mono small" title={r.eventId}>
                          {r.eventName}
                        </span>
                      ) : (
                        <span class="muted">{r.triggerKind}</span>
                      )}
                    </td>
                    <td>
                      <Time at={r.createdAt} />
                    </td>
                    <td class="num">{dur(r.durationMs)}</td>
                    <td class="num">{r.stepCount}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
        <div class="pager">
          <div class="muted small">
            Page {cursors.length}
            {runs.data ? ` · ${runs.data.items.length} runs` : ''}
          </div>
          <label class="small">
            Per page{' '}
            <select value={limit} onChange={(e) => setLimit(Number((e.target as HTMLSelectElement).value))}>
              {[30, 50, 100, 200].map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </label>
          <div class="pager-buttons">
            <button class="btn btn-sm" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
              ← Newer
            </button>
            <button class="btn btn-sm" disabled={!runs.data?.next} onClick={() => setCursors((c) => [...c, runs.data!.next])}>
              Older →
            </button>
          </div>
        </div>
      </div>
      {bulk && <BulkAction kind={bulk} onClose={() => setBulk(undefined)} defaults={{ app: f.app, workflow: f.workflow, tags }} />}
    </div>
  );
}

function Stat({ label, value, tone, meter, hint }: { label: string; value: string; tone?: string; meter?: number; hint?: string }): JSX.Element {
  return (
    <div class={`stat ${tone ? `tone-${tone}` : ''}`}>
      <div class="stat-label">{label}</div>
      <div class="stat-value">{value}</div>
      {hint && <div class="stat-hint">{hint}</div>}
      {meter !== undefined && (
        <div class="meter" aria-hidden="true">
          <span style={{ width: `${meter}%` }} />
        </div>
      )}
    </div>
  );
}

function Select({ label, value, onChange, options, anyLabel = 'any' }: { label: string; value?: string; onChange: (v: string | undefined) => void; options: [string, string][]; anyLabel?: string }): JSX.Element {
  return (
    <label class="filter">
      <span>{label}</span>
      <select value={value ?? ''} onChange={(e) => onChange((e.target as HTMLSelectElement).value || undefined)}>
        <option value="">{anyLabel}</option>
        {options.map(([v, l]) => (
          <option key={v} value={v}>
            {l}
          </option>
        ))}
      </select>
    </label>
  );
}

/** Adds the typed tag to the filter on Enter; the active tags show as removable chips below the filters. */
function TagInput({ full, onAdd }: { full: boolean; onAdd: (tag: string) => void }): JSX.Element {
  const [draft, setDraft] = useState('');
  return (
    <label class="filter">
      <span>Tag</span>
      <input
        value={draft}
        maxLength={128}
        disabled={full}
        placeholder={full ? 'at most 10' : 'add, then Enter'}
        onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        onKeyDown={(e) => {
          if (e.key !== 'Enter') return;
          e.preventDefault();
          if (!draft.trim()) return;
          onAdd(draft.trim());
          setDraft('');
        }}
      />
    </label>
  );
}

/** A text filter applied on Enter or blur, so typing does not fire a query per key. */
function TextFilter({ label, value, onChange }: { label: string; value?: string; onChange: (v: string | undefined) => void }): JSX.Element {
  const [draft, setDraft] = useState(value ?? '');
  useEffect(() => setDraft(value ?? ''), [value]);
  const apply = () => draft.trim() !== (value ?? '') && onChange(draft.trim() || undefined);
  return (
    <label class="filter">
      <span>{label}</span>
      <input
        value={draft}
        placeholder="any"
        onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        onBlur={apply}
        onKeyDown={(e) => {
          if (e.key === 'Enter') {
            e.preventDefault();
            apply();
          }
        }}
      />
    </label>
  );
}

type BulkKind = 'replay' | 'cancel';

interface BulkResult {
  matched: number;
  replayed?: number;
  cancelled?: number;
  skipped: number;
  failed: number;
  capped: boolean;
}

/** What differs between the two bulk actions. */
const BULK: Record<BulkKind, { title: string; confirm: string; done: string; statuses: RunStatus[]; first?: RunStatus; about: string; after: string }> = {
  replay: {
    title: 'Bulk replay',
    confirm: 'Replay matching runs',
    done: 'Replayed',
    statuses: ['failed', 'succeeded', 'cancelled'],
    first: 'failed',
    about: 'Replays finished runs matching every field below as new runs (newest first, up to the per-call ceiling). At least one field is required.',
    after: '/runs',
  },
  cancel: {
    title: 'Bulk cancel',
    confirm: 'Cancel matching runs',
    done: 'Cancelled',
    statuses: ['queued', 'running', 'paused'],
    about: "Cancels the runs that have not ended matching every field below (newest first, up to the per-call ceiling); the condition is CEL over each run's event, e.g. event.data.tenant == 'acme'. At least one field is required.",
    after: '/runs?status=cancelled',
  },
};

/** POST /v1/runs/bulk-replay or bulk-cancel: acts on the runs matching a filter (at least one field), and shows its counts. */
function BulkAction({ kind, onClose, defaults }: { kind: BulkKind; onClose: () => void; defaults: { app?: string; workflow?: string; tags: string[] } }): JSX.Element {
  const cfg = BULK[kind];
  const [b, setB] = useState<{ app?: string; workflow?: string; status?: string; runType?: string; since?: string; if?: string; tags?: string }>({
    app: defaults.app,
    workflow: defaults.workflow,
    tags: defaults.tags.join(', ') || undefined,
    status: cfg.first,
  });
  const [result, setResult] = useState<BulkResult>();
  const body = useMemo(() => {
    const { tags, ...rest } = b;
    const o: Record<string, string | string[]> = {};
    for (const [key, v] of Object.entries(rest)) if (v) o[key] = key === 'since' ? sinceIso(v)! : v;
    const list = splitTags(tags ?? '');
    if (list.length) o.tags = list;
    return o;
  }, [b]);
  const acted = (r: BulkResult | undefined) => (kind === 'replay' ? r?.replayed : r?.cancelled) ?? 0;
  if (result) {
    return (
      <Confirm
        title={`${cfg.title} done`}
        confirm={kind === 'replay' ? 'Show replays' : 'Show cancelled runs'}
        onClose={onClose}
        onConfirm={async () => navigate(cfg.after)}
        body={
          <div class="kv">
            <div>Matched</div>
            <div>{result.matched}</div>
            <div>{cfg.done}</div>
            <div>{acted(result)}</div>
            <div>Skipped</div>
            <div>{result.skipped}</div>
            <div>Failed</div>
            <div>{result.failed}</div>
            <div>Capped</div>
            <div>{result.capped ? 'yes: run it again for the rest' : 'no'}</div>
          </div>
        }
      />
    );
  }
  const field = (k: keyof typeof b, label: string, opts?: [string, string][]) => (
    <div class="field">
      <label for={`bulk-${k}`}>{label}</label>
      {opts ? (
        <select id={`bulk-${k}`} value={b[k] ?? ''} onChange={(e) => setB({ ...b, [k]: (e.target as HTMLSelectElement).value || undefined })}>
          <option value="">any</option>
          {opts.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
      ) : (
        <input id={`bulk-${k}`} value={b[k] ?? ''} onInput={(e) => setB({ ...b, [k]: (e.target as HTMLInputElement).value || undefined })} />
      )}
    </div>
  );
  return (
    <Confirm
      title={cfg.title}
      confirm={cfg.confirm}
      dismiss="Back"
      danger={kind === 'cancel'}
      disabled={Object.keys(body).length === 0}
      keepOpen
      onClose={onClose}
      onConfirm={async () => {
        const r = await send<BulkResult>('POST', `/runs/bulk-${kind}`, body);
        setResult(r);
        toast(`${cfg.done} ${acted(r)} runs`);
      }}
      body={
        <div class="grid2">
          <p class="span2 muted">{cfg.about}</p>
          {field('status', 'Status', cfg.statuses.map((st) => [st, st]))}
          {field('runType', 'Trigger', [['event', 'event'], ['cron', 'cron']])}
          {field('app', 'App')}
          {field('workflow', 'Workflow')}
          {field('tags', 'Tags (comma-separated; a run needs every one)')}
          {field('since', 'Started', Object.keys(SINCE).map((key) => [key, `last ${key}`]))}
          {kind === 'cancel' && field('if', 'Condition (CEL)')}
        </div>
      }
    />
  );
}

