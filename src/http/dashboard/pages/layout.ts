import { html } from '../html.js';
import type { Html } from '../html.js';

export type PageName =
  'overview' | 'runs' | 'run' | 'task' | 'events' | 'poisoned' | 'schedules' | 'login';

export interface PageOptions {
  page: PageName;
  title: string;
  /**
   * The SSE stream that keeps this page live (`/api/stream?...`). In `changes` mode the client
   * re-fetches the page's `<main>` when something relevant happened; in `events` mode it
   * appends each event to the tail. Absent: a static page.
   */
  stream?: string;
  /** Poisoned tasks, shown in the navigation. */
  poisoned?: number;
  /** Offer a logout button (a token is set). */
  loggedIn?: boolean;
}

const NAV: { page: PageName; href: string; label: string }[] = [
  { page: 'overview', href: '/', label: 'Overview' },
  { page: 'runs', href: '/runs', label: 'Runs' },
  { page: 'schedules', href: '/schedules', label: 'Schedules' },
  { page: 'events', href: '/events', label: 'Events' },
  { page: 'poisoned', href: '/poisoned', label: 'Poisoned' },
];

/**
 * The page shell. Scripts and styles are external files (`/assets/...`), so the Content
 * Security Policy can forbid inline script outright: even an escaping bug could not run code.
 */
export function layout(opts: PageOptions, main: Html): Html {
  const active = opts.page === 'run' ? 'runs' : opts.page === 'task' ? 'runs' : opts.page;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${opts.title} · Sonar</title>
        <link rel="icon" href="data:," />
        <link rel="stylesheet" href="/assets/style.css" />
        <script src="/assets/app.js" defer></script>
      </head>
      <body data-page="${opts.page}" data-stream="${opts.stream ?? ''}">
        <header>
          <a class="brand" href="/">Sonar</a>
          <nav>
            ${NAV.map(
              (n) =>
                html`<a href="${n.href}" class="${n.page === active ? 'active' : ''}"
                  >${n.label}${
                    n.page === 'poisoned' && opts.poisoned
                      ? html` <span class="count" id="nav-poisoned">${opts.poisoned}</span>`
                      : ''
                  }</a
                >`,
            )}
          </nav>
          <span id="live" class="live" title="live updates"
            >${opts.stream ? 'connecting' : ''}</span
          >
          ${
            opts.loggedIn
              ? html`<form method="post" action="/logout">
                  <button class="link">log out</button>
                </form>`
              : ''
          }
        </header>
        <div id="flash" role="status" aria-live="polite"></div>
        <main id="main">${main}</main>
        <dialog id="confirm">
          <form method="dialog">
            <p id="confirm-text"></p>
            <label>Reason <input id="confirm-reason" name="reason" maxlength="500" /></label>
            <menu>
              <button value="cancel" id="confirm-no">Back</button>
              <button value="ok" id="confirm-yes" class="danger">Confirm</button>
            </menu>
          </form>
        </dialog>
      </body>
    </html>`;
}

/** Buttons that call an action; the client asks for confirmation first when `confirm` is set. */
export function actionButton(
  label: string,
  url: string,
  opts: { confirm?: string; danger?: boolean; id?: string } = {},
): Html {
  return html`<button
    type="button"
    class="${opts.danger ? 'danger' : ''}"
    data-action="${url}"
    data-confirm="${opts.confirm ?? ''}"
    ${opts.id ? html`id="${opts.id}"` : ''}
  >
    ${label}
  </button>`;
}
