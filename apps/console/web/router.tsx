import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** A history-API router: the gateway answers every console path with index.html. */
const listeners = new Set<() => void>();
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  for (const l of listeners) l();
}
addEventListener('popstate', () => {
  for (const l of listeners) l();
});

export interface Location {
  path: string;
  query: URLSearchParams;
}

export function useLocation(): Location {
  const [, force] = useState(0);
  useEffect(() => {
    const l = () => force((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/** Replace the query string of the current page (filters live in the URL, so a view can be shared). */
export function setQuery(params: Record<string, string | undefined>, opts: { replace?: boolean } = { replace: true }): void {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  navigate(location.pathname + (s ? `?${s}` : ''), opts);
}

export interface LinkProps {
  href: string;
  class?: string;
  title?: string;
  children: ComponentChildren;
  'aria-current'?: 'page';
  'aria-label'?: string;
}

/** An anchor that navigates in-app on a plain click (new tab, copy link and the rest still work). */
export function Link({ href, children, ...rest }: LinkProps): JSX.Element {
  return (
    <a
      {...rest}
      href={href}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
