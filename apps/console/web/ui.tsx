import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, qs } from './api';
import { Link } from './router';

// ---- data loading

export interface Async<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** Load on mount and whenever `deps` change; reload() refetches quietly (the old data stays on screen). */
export function useAsync<T>(fn: () => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const gen = useRef(0);
  const load = useCallback(() => {
    const mine = ++gen.current;
    setState((s) => ({ ...s, loading: true }));
    fn().then(
      (data) => mine === gen.current && setState({ data, loading: false }),
      (error: Error) => mine === gen.current && setState((s) => ({ data: s.data, error, loading: false })),
    );
  }, deps);
  useEffect(() => {
    setState({ loading: true });
    load();
  }, [load]);
  return { data: state.data, error: state.error, loading: state.loading, reload: load };
}

/** Call at most once per `ms`, trailing: bursts of live frames cost one refetch. */
export function useThrottle(fn: () => void, ms: number): () => void {
  const ref = useRef({ fn, timer: 0 as number | undefined, last: 0 });
  ref.current.fn = fn;
  useEffect(() => () => clearTimeout(ref.current.timer), []);
  return useCallback(() => {
    const r = ref.current;
    if (r.timer) return;
    const wait = Math.max(0, r.last + ms - Date.now());
    r.timer = window.setTimeout(() => {
      r.timer = undefined;
      r.last = Date.now();
      r.fn();
    }, wait);
  }, [ms]);
}

/** Re-render every `ms` (relative times). */
export function useTick(ms = 15_000): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setN((x) => x + 1), ms);
    return () => clearInterval(t);
  }, [ms]);
  return n;
}

// ---- toasts

type Toast = { id: number; kind: 'ok' | 'error'; text: string };
let toasts: Toast[] = [];
const toastListeners = new Set<() => void>();
let toastSeq = 0;
export function toast(text: string, kind: 'ok' | 'error' = 'ok'): void {
  const t = { id: ++toastSeq, kind, text };
  toasts = [...toasts, t];
  toastListeners.forEach((l) => l());
  setTimeout(() => {
    toasts = toasts.filter((x) => x.id !== t.id);
    toastListeners.forEach((l) => l());
  }, kind === 'error' ? 8000 : 4000);
}
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}
export function Toasts(): JSX.Element {
  const [, force] = useState(0);
  useEffect(() => {
    const l = () => force((n) => n + 1);
    toastListeners.add(l);
    return () => void toastListeners.delete(l);
  }, []);
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          {t.text}
        </div>
      ))}
    </div>
  );
}

// ---- formatting

export function ago(iso: string | undefined): string {
  if (!iso) return '—';
  const s = (Date.now() - Date.parse(iso)) / 1000;
  const fut = s < 0;
  const a = Math.abs(s);
  const v = a < 5 ? 'just now' : a < 60 ? `${Math.floor(a)}s` : a < 3600 ? `${Math.floor(a / 60)}m` : a < 86400 ? `${Math.floor(a / 3600)}h` : `${Math.floor(a / 86400)}d`;
  if (v === 'just now') return v;
  return fut ? `in ${v}` : `${v} ago`;
}

export function Time({ at }: { at: string | undefined }): JSX.Element {
  useTick();
  if (!at) return <span class="muted">—</span>;
  return (
    <time dateTime={at} title={new Date(at).toLocaleString()}>
      {ago(at)}
    </time>
  );
}

export function dur(ms: number | undefined): string {
  if (ms === undefined || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  if (m < 60) return `${m}m ${Math.round((ms % 60_000) / 1000)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

export const num = (n: number | undefined) => (n === undefined ? '—' : n.toLocaleString());

// ---- small components

const TONE: Record<string, string> = {
  succeeded: 'ok', approved: 'ok', delivered: 'ok', accepted: 'ok', live: 'ok',
  failed: 'bad', denied: 'bad', dead: 'bad', exhausted: 'bad', rejected: 'bad', error: 'bad',
  cancelled: 'mute', skipped: 'mute', stale: 'mute',
  running: 'run', delivering: 'run', queued: 'wait', pending: 'wait', waiting: 'wait', sleeping: 'wait', child: 'wait', retrying: 'warn',
  paused: 'warn', escalated: 'warn', needs_attention: 'warn',
};

export function Badge({ status, label, testId }: { status: string; label?: string; testId?: string }): JSX.Element {
  return (
    <span class={`badge tone-${TONE[status] ?? 'mute'}`} data-status={status} data-testid={testId}>
      <span class="dot" aria-hidden="true" />
      {label ?? status.replace(/_/g, ' ')}
    </span>
  );
}

export function Spinner({ label = 'Loading' }: { label?: string }): JSX.Element {
  return (
    <div class="spinner" role="status">
      <span class="spin" aria-hidden="true" /> {label}…
    </div>
  );
}

export function ErrorBox({ error, retry }: { error: Error; retry?: () => void }): JSX.Element {
  return (
    <div class="errorbox" role="alert">
      <strong>Could not load this.</strong> {errorText(error)}
      {retry && (
        <button class="btn btn-sm" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }): JSX.Element {
  return (
    <div class="empty">
      <div class="empty-title">{title}</div>
      {children && <div class="empty-body">{children}</div>}
    </div>
  );
}

export function Copy({ text, label }: { text: string; label?: string }): JSX.Element {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="btn-icon"
      title={`Copy ${label ?? text}`}
      aria-label={`Copy ${label ?? 'value'}`}
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => {
          setDone(true);
          setTimeout(() => setDone(false), 1200);
        });
      }}
    >
      {done ? <CheckIcon /> : <CopyIcon />}
    </button>
  );
}

// Inline icons: the system fonts of a Linux desktop lack glyphs like ⧉, so symbols are drawn, not typed.
const svg = { width: 14, height: 14, viewBox: '0 0 16 16', fill: 'none', stroke: 'currentColor', 'stroke-width': 1.6, 'stroke-linecap': 'round', 'stroke-linejoin': 'round', 'aria-hidden': 'true' } as const;
function CopyIcon(): JSX.Element {
  return (
    <svg {...svg}>
      <rect x="5.5" y="5.5" width="8" height="8" rx="1.5" />
      <path d="M10.5 3.5v-.5a1.5 1.5 0 0 0-1.5-1.5H4A1.5 1.5 0 0 0 2.5 3v5A1.5 1.5 0 0 0 4 9.5h.5" />
    </svg>
  );
}
function CheckIcon(): JSX.Element {
  return (
    <svg {...svg}>
      <path d="M3 8.5l3.2 3L13 4.5" />
    </svg>
  );
}

// ---- cross-page signals

const approvalListeners = new Set<() => void>();
/** Say that an approval was decided here, so the nav badge of open approvals updates at once. */
export function approvalsChanged(): void {
  approvalListeners.forEach((l) => l());
}
export function onApprovalsChanged(l: () => void): () => void {
  approvalListeners.add(l);
  return () => void approvalListeners.delete(l);
}

export function RunLink({ id }: { id: string }): JSX.Element {
  return (
    <Link class="mono link" href={`/runs/${encodeURIComponent(id)}`}>
      {id}
    </Link>
  );
}

/** JSON, pretty-printed with light syntax colouring (text nodes only: never HTML from data). */
export function JsonView({ value, empty = 'null' }: { value: unknown; empty?: string }): JSX.Element {
  if (value === undefined) return <pre class="json muted">{empty}</pre>;
  const text = JSON.stringify(value, null, 2) ?? 'undefined';
  const parts: JSX.Element[] = [];
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0;
  let m: RegExpExecArray | null;
  let i = 0;
  while ((m = re.exec(text))) {
    if (m.index > last) parts.push(<span key={i++}>{text.slice(last, m.index)}</span>);
    const cls = m[1] ? (m[2] ? 'j-key' : 'j-str') : m[3] ? 'j-lit' : 'j-num';
    parts.push(
      <span key={i++} class={cls}>
        {m[1] ?? m[0]}
      </span>,
    );
    if (m[2]) parts.push(<span key={i++}>{m[2]}</span>);
    last = re.lastIndex;
  }
  if (last < text.length) parts.push(<span key={i++}>{text.slice(last)}</span>);
  return <pre class="json">{parts}</pre>;
}

export interface JsonDraft {
  text: string;
  valid: boolean;
  value: unknown;
  error?: string;
}
export const jsonDraft = (value: unknown): JsonDraft => ({ text: JSON.stringify(value ?? null, null, 2), valid: true, value });

/** A JSON text editor that says exactly why its text is not JSON; callers refuse to submit until it is. */
export function JsonEditor({ draft, onChange, label, id, rows = 10 }: { draft: JsonDraft; onChange: (d: JsonDraft) => void; label: string; id: string; rows?: number }): JSX.Element {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        class={`code ${draft.valid ? '' : 'invalid'}`}
        rows={rows}
        spellcheck={false}
        aria-invalid={!draft.valid}
        aria-describedby={`${id}-err`}
        value={draft.text}
        onInput={(e) => {
          const text = (e.target as HTMLTextAreaElement).value;
          try {
            onChange({ text, valid: true, value: JSON.parse(text) });
          } catch (err) {
            onChange({ text, valid: false, value: undefined, error: (err as Error).message });
          }
        }}
      />
      <div id={`${id}-err`} class={draft.valid ? 'hint' : 'field-error'}>
        {draft.valid ? 'Valid JSON' : `Not valid JSON: ${draft.error ?? ''}`}
      </div>
    </div>
  );
}

/** A modal dialog: focus moves in, Escape and the backdrop close it, Tab stays inside. */
export function Modal({ title, onClose, children, footer, wide }: { title: string; onClose: () => void; children: ComponentChildren; footer?: ComponentChildren; wide?: boolean }): JSX.Element {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const prev = document.activeElement as HTMLElement | null;
    const el = ref.current;
    const first = el?.querySelector<HTMLElement>('textarea, input, select, button.btn-primary, button');
    first?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onClose();
      if (e.key === 'Tab' && el) {
        const f = [...el.querySelectorAll<HTMLElement>('a[href], button:not([disabled]), textarea, input, select')];
        if (f.length === 0) return;
        const [a, z] = [f[0]!, f[f.length - 1]!];
        if (e.shiftKey && document.activeElement === a) (e.preventDefault(), z.focus());
        else if (!e.shiftKey && document.activeElement === z) (e.preventDefault(), a.focus());
      }
    };
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener('keydown', onKey);
      prev?.focus();
    };
  }, []);
  return (
    <div class="backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div class={`modal ${wide ? 'modal-wide' : ''}`} role="dialog" aria-modal="true" aria-label={title} ref={ref}>
        <div class="modal-head">
          <h2>{title}</h2>
          <button class="btn-icon" aria-label="Close" onClick={onClose}>
            ✕
          </button>
        </div>
        <div class="modal-body">{children}</div>
        {footer && <div class="modal-foot">{footer}</div>}
      </div>
    </div>
  );
}

/** A confirmation step for anything that changes a run or a config. */
export function Confirm(props: {
  title: string;
  body: ComponentChildren;
  confirm: string;
  /** The label of the button that backs out. @default 'Cancel' */
  dismiss?: string;
  danger?: boolean;
  disabled?: boolean;
  /** Stay open after confirming (the body shows the outcome). */
  keepOpen?: boolean;
  onConfirm: () => Promise<void>;
  onClose: () => void;
}): JSX.Element {
  const [busy, setBusy] = useState(false);
  return (
    <Modal
      title={props.title}
      onClose={props.onClose}
      footer={
        <>
          <button class="btn" onClick={props.onClose}>
            {props.dismiss ?? 'Cancel'}
          </button>
          <button
            class={`btn ${props.danger ? 'btn-danger' : 'btn-primary'}`}
            disabled={busy || props.disabled}
            onClick={async () => {
              setBusy(true);
              try {
                await props.onConfirm();
                if (!props.keepOpen) props.onClose();
              } catch (err) {
                toast(errorText(err), 'error');
              } finally {
                setBusy(false);
              }
            }}
          >
            {busy ? 'Working…' : props.confirm}
          </button>
        </>
      }
    >
      {props.body}
    </Modal>
  );
}

export function Tabs<T extends string>({ tabs, value, onChange, label }: { tabs: { id: T; label: ComponentChildren }[]; value: T; onChange: (t: T) => void; label: string }): JSX.Element {
  return (
    <div class="tabs" role="tablist" aria-label={label}>
      {tabs.map((t) => (
        <button key={t.id} role="tab" aria-selected={t.id === value} class={`tab ${t.id === value ? 'active' : ''}`} onClick={() => onChange(t.id)}>
          {t.label}
        </button>
      ))}
    </div>
  );
}

export function PageHead({ title, sub, children }: { title: string; sub?: ComponentChildren; children?: ComponentChildren }): JSX.Element {
  return (
    <header class="page-head">
      <div>
        <h1>{title}</h1>
        {sub && <p class="sub">{sub}</p>}
      </div>
      <div class="page-actions">{children}</div>
    </header>
  );
}

export function LiveDot({ live }: { live: boolean }): JSX.Element {
  return (
    <span class={`live ${live ? 'on' : ''}`} title={live ? 'Live: updates stream in' : 'Reconnecting…'}>
      <span class="pulse" aria-hidden="true" />
      {live ? 'Live' : 'Offline'}
    </span>
  );
}

/** qs() and setQuery() keep one value per name; the tag filter is the repeated `tag` parameter GET /v1/runs reads. */
export function withTags(params: Record<string, string | number | undefined>, tags: string[]): string {
  const u = new URLSearchParams(qs(params).slice(1));
  for (const t of tags) u.append('tag', t);
  const s = u.toString();
  return s ? `?${s}` : '';
}

/** "a, b ,,c" -> ["a", "b", "c"]: how a form field takes tags. */
export const splitTags = (text: string) => text.split(',').map((t) => t.trim()).filter(Boolean);

/** Tags as chips: each links to the runs carrying it, or with onPick adds it to the list's filter. */
export function TagChips({ tags, onPick }: { tags: string[] | undefined; onPick?: (tag: string) => void }): JSX.Element | null {
  if (!tags?.length) return null;
  return (
    <span class="tags">
      {tags.map((t) =>
        onPick ? (
          <button key={t} type="button" class="tag tag-link" title={`Filter by tag ${t}`} onClick={() => onPick(t)}>
            {t}
          </button>
        ) : (
          <Link key={t} class="tag tag-link" href={`/runs${withTags({}, [t])}`} title={`Runs tagged ${t}`}>
            {t}
          </Link>
        ),
      )}
    </span>
  );
}
