import { html } from '../html.js';
import type { Html } from '../html.js';

/** The token form: posting the right token sets the session cookie (for pages and SSE). */
export function loginMain(failed: boolean, next: string): Html {
  return html`<form method="post" action="/login" class="login" id="login">
    <h1>Sonar</h1>
    <p>This dashboard needs the token set in <code>SONAR_HTTP_TOKEN</code>.</p>
    ${failed ? html`<p class="warn" id="login-failed">That token is not right.</p>` : ''}
    <input type="hidden" name="next" value="${next}" />
    <label
      >Token <input type="password" name="token" autocomplete="current-password" autofocus
    /></label>
    <button type="submit">Log in</button>
  </form>`;
}
