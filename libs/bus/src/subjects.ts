/**
 * NATS subject matching for the embedded adapter, so a pattern means the same
 * thing on both adapters: tokens split on `.`, `*` matches exactly one token,
 * `>` (last token only) matches one or more remaining tokens.
 */

/** True when `subject` (no wildcards) is matched by `pattern`. */
export function subjectMatches(pattern: string, subject: string): boolean {
  if (pattern === subject) return true;
  // Most patterns are exact subjects (a live run stream each): no split per publish for those.
  if (!pattern.includes('*') && !pattern.includes('>')) return false;
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    const tok = p[i];
    if (tok === '>') return s.length > i;
    if (i >= s.length) return false;
    if (tok !== '*' && tok !== s[i]) return false;
  }
  return p.length === s.length;
}

/**
 * True when some subject matches both patterns. JetStream refuses two streams
 * whose subjects overlap; the embedded adapter applies the same rule.
 */
export function subjectsOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    // `>` needs at least one token on the other side, which a present token (or `>`/`*`) gives.
    if (p === '>') return q !== undefined;
    if (q === '>') return p !== undefined;
    if (p === undefined || q === undefined) return false;
    if (p !== '*' && q !== '*' && p !== q) return false;
  }
  return true;
}

/** Throws on a subject NATS would reject: empty tokens, whitespace, `>` not last; wildcards only when allowed. */
export function assertValidSubject(subject: string, allowWildcards: boolean): void {
  const toks = subject.split('.');
  const bad = (why: string): never => {
    throw new Error(`invalid subject '${subject}': ${why}`);
  };
  if (subject.length === 0) bad('empty');
  toks.forEach((t, i) => {
    if (t.length === 0) bad('empty token');
    if (/\s/.test(t)) bad('whitespace');
    if (t === '*' || t === '>') {
      if (!allowWildcards) bad('wildcards are not allowed here');
      if (t === '>' && i !== toks.length - 1) bad("'>' must be the last token");
    } else if (t.includes('*') || t.includes('>')) {
      bad('a wildcard must be a whole token');
    }
  });
}
