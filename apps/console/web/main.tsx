import { render, type JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './styles.css';
import { get, onSessionChange, session, setSession } from './api';
import { Link, navigate, useLocation } from './router';
import { onApprovalsChanged, Toasts } from './ui';
import { SignIn } from './pages/signin';
import { RunsPage } from './pages/runs';
import { RunPage } from './pages/run';
import { ApprovalsPage } from './pages/approvals';
import { EventsPage } from './pages/events';
import { WebhooksPage } from './pages/webhooks';
import { RunnersPage, WorkflowsPage } from './pages/runners';

const NAV = [
  { href: '/runs', label: 'Runs', icon: '▶' },
  { href: '/approvals', label: 'Approvals', icon: '✓' },
  { href: '/events', label: 'Events', icon: '⚡' },
  { href: '/webhooks', label: 'Webhooks', icon: '⇄' },
  { href: '/runners', label: 'Runners', icon: '◉' },
  { href: '/workflows', label: 'Workflows', icon: '≡' },
];

/** Open approvals for the nav badge, refreshed every 15 s. */
function useOpenApprovals(): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    let stop = false;
    const load = async () => {
      try {
        const [p, e] = await Promise.all([get<unknown[]>('/approvals?status=pending&limit=1000'), get<unknown[]>('/approvals?status=escalated&limit=1000')]);
        if (!stop) setN(p.length + e.length);
      } catch {
        /* the badge is a hint; the page shows errors */
      }
    };
    void load();
    const t = setInterval(load, 15_000);
    const off = onApprovalsChanged(() => void load());
    return () => ((stop = true), clearInterval(t), off());
  }, []);
  return n;
}

function Shell(): JSX.Element {
  const loc = useLocation();
  const s = session()!;
  const open = useOpenApprovals();
  useEffect(() => {
    if (loc.path === '/' || loc.path === '') navigate('/runs', { replace: true });
  }, [loc.path]);
  let page: JSX.Element;
  const m = /^\/runs\/([^/]+)$/.exec(loc.path);
  if (m) page = <RunPage id={decodeURIComponent(m[1]!)} />;
  else if (loc.path.startsWith('/runs')) page = <RunsPage />;
  else if (loc.path.startsWith('/approvals')) page = <ApprovalsPage />;
  else if (loc.path.startsWith('/events')) page = <EventsPage />;
  else if (loc.path.startsWith('/webhooks')) page = <WebhooksPage />;
  else if (loc.path.startsWith('/runners')) page = <RunnersPage />;
  else if (loc.path.startsWith('/workflows')) page = <WorkflowsPage />;
  else
    page = (
      <div class="page">
        <div class="card">
          <div class="empty">
            <div class="empty-title">No such page</div>
            <div class="empty-body">
              <span class="mono">{loc.path}</span> is not a page of the console.
            </div>
            <div class="empty-action">
              <Link href="/runs" class="btn btn-primary">
                Go to runs
              </Link>
            </div>
          </div>
        </div>
      </div>
    );
  const kind = s.key.startsWith('ck_') ? 'console key' : s.canWrite ? 'secret key' : 'public key';
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <nav class="side" aria-label="Main">
        <div class="brand">
          <span class="logo" aria-hidden="true" />
          <span>dws</span>
          <span class="brand-sub">console</span>
        </div>
        <ul>
          {NAV.map((n) => (
            <li key={n.href}>
              <Link href={n.href} class={`nav-item ${loc.path.startsWith(n.href) ? 'active' : ''}`} aria-current={loc.path.startsWith(n.href) ? 'page' : undefined}>
                <span class="nav-icon" aria-hidden="true">
                  {n.icon}
                </span>
                {n.label}
                {n.href === '/approvals' && open > 0 && (
                  <span class="count" aria-label={`${open} open`}>
                    {open}
                  </span>
                )}
              </Link>
            </li>
          ))}
        </ul>
        <div class="who">
          <div class="who-name">{s.actor || 'Signed in'}</div>
          <div class="who-kind">
            {kind}
            {!s.canWrite && <span class="ro">read-only</span>}
          </div>
          <button class="btn btn-sm btn-ghost sign-out" onClick={() => setSession(undefined)}>
            Sign out
          </button>
        </div>
      </nav>
      <main id="main" class="main" tabIndex={-1}>
        {page}
      </main>
    </div>
  );
}

function App(): JSX.Element {
  const [, force] = useState(0);
  useEffect(() => onSessionChange(() => force((n) => n + 1)), []);
  return (
    <>
      {session() ? <Shell /> : <SignIn />}
      <Toasts />
    </>
  );
}

render(<App />, document.getElementById('app')!);
