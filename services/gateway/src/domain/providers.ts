/**
 * A workspace's own model providers (issue: "each provider's base URL and
 * key per workspace, sealed at rest, set through the admin API"). The
 * invoker uses a workspace's entry over the service-wide default of the
 * environment (SERVICE_ANTHROPIC_*, SERVICE_OPENAI_*), field by field.
 */

export const PROVIDER_KINDS = ['anthropic', 'openai'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

export interface ProviderSettings {
  baseUrl?: string;
  apiKey?: string;
}

export type Providers = Partial<Record<ProviderKind, ProviderSettings>>;
/** A PATCH: per provider, fields to set (a null field removes it), or null to remove the workspace's entry. */
export type ProvidersPatch = Partial<Record<ProviderKind, { baseUrl?: string | null; apiKey?: string | null } | null>>;

/** Providers after a PATCH. */
export function mergeProviders(current: Providers, patch: ProvidersPatch): Providers {
  const out: Providers = { ...current };
  for (const kind of PROVIDER_KINDS) {
    const p = patch[kind];
    if (p === undefined) continue;
    if (p === null) {
      delete out[kind];
      continue;
    }
    const next: ProviderSettings = { ...out[kind] };
    for (const f of ['baseUrl', 'apiKey'] as const) {
      if (p[f] === null) delete next[f];
      else if (p[f] !== undefined) next[f] = p[f];
    }
    if (Object.keys(next).length) out[kind] = next;
    else delete out[kind];
  }
  return out;
}

/** What the admin API shows: base URLs, and whether a key is set (never the key). */
export function providersView(p: Providers): Record<string, { baseUrl?: string; apiKeySet: boolean }> {
  const out: Record<string, { baseUrl?: string; apiKeySet: boolean }> = {};
  for (const kind of PROVIDER_KINDS) {
    const s = p[kind];
    if (s) out[kind] = { ...(s.baseUrl ? { baseUrl: s.baseUrl } : {}), apiKeySet: !!s.apiKey };
  }
  return out;
}
