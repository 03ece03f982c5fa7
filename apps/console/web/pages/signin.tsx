import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, probe, setSession } from '../api';
import { errorText } from '../ui';

/**
 * Sign-in: a console key (ck_) with the person's name, which the API records
 * as the actor of approvals; or a secret key (full access) or a public key
 * (read-only). Nothing is fetched before a key is checked.
 */
export function SignIn(): JSX.Element {
  const [key, setKey] = useState('');
  const [actor, setActor] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const k = key.trim();
  const isConsole = k.startsWith('ck_');
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    if (!k) return setError('Enter an API key.');
    if (isConsole && !actor.trim()) return setError('A console key acts for a person: enter your name.');
    setBusy(true);
    try {
      setSession(await probe(k, actor.trim()));
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'This key was not accepted. Check that you copied all of it, and that it has not been revoked.' : errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="signin">
      {/* noValidate: the form's own checks say what is missing, in the page's words and style. */}
      <form class="signin-card" onSubmit={submit} aria-labelledby="signin-title" noValidate>
        <div class="brand brand-lg">
          <span class="logo" aria-hidden="true" />
          <span>dws</span>
          <span class="brand-sub">console</span>
        </div>
        <h1 id="signin-title">Sign in to your workspace</h1>
        <p class="sub">Runs, approvals, events and webhooks of the workspace your key belongs to.</p>
        <div class="field">
          <label for="key">API key</label>
          <input id="key" name="key" type="password" autoComplete="off" spellcheck={false} placeholder="ck_…, sk_… or pk_…" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} autoFocus />
          <div class="hint">A console key (ck_) with your name, a secret key (sk_), or a public key (pk_: read-only).</div>
        </div>
        <div class="field">
          <label for="actor">Your name {isConsole ? '' : <span class="muted">(optional)</span>}</label>
          <input id="actor" name="actor" autoComplete="name" placeholder="e.g. Ada Lovelace" value={actor} onInput={(e) => setActor((e.target as HTMLInputElement).value)} required={isConsole} />
          <div class="hint">Recorded as who decided an approval (X-Service-Actor) when you sign in with a console key.</div>
        </div>
        {error && (
          <div class="form-error" role="alert">
            {error}
          </div>
        )}
        <button class="btn btn-primary btn-block" type="submit" disabled={busy}>
          {busy ? 'Checking key…' : 'Sign in'}
        </button>
        <p class="fine">The key stays in this tab (session storage) and is sent only to this server.</p>
      </form>
    </div>
  );
}
