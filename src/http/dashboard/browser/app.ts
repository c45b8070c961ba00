/**
 * The dashboard's only script, served as `/assets/app.js` (prebuilt into dist/ by `npm run
 * build`, or transpiled on first request when run from the sources: ../assets/app-js.ts).
 * What it does:
 * - subscribes to the page's SSE stream (`data-stream` on <body>);
 * - `change` notices: re-fetches the page's <main> (header `X-Sonar-Fragment: 1`), at most
 *   every 500 ms and never two at once;
 * - `event` messages (Events page): prepends a row, built with textContent (never innerHTML,
 *   so event data cannot inject markup);
 * - ticks pulse ages every second on the server's clock (`data-now` gives the offset);
 * - action buttons (`data-action`): confirm in a <dialog> when `data-confirm` is set, then
 *   POST JSON (a content type no cross-site form can send).
 * The HTML it swaps in is rendered and escaped by the server.
 */

/** One event of the live tail, as the server's `event` message carries it. */
interface TailEvent {
  seq: number;
  time: string;
  subject: string;
  type: string;
  data?: Record<string, unknown>;
}

/** What an action's POST answers: a retry, a task cancel or a run cancel. */
interface ActionAnswer {
  task?: string;
  round?: number;
  step?: string;
  runId?: string;
  taskId?: string;
  cancelled?: number;
  error?: { message?: string };
}

const body = document.body;
const main = document.getElementById('main');
const live = document.getElementById('live');
const flash = document.getElementById('flash');
const streamUrl = body.getAttribute('data-stream');
let offsetMs = 0;
let flashTimer: ReturnType<typeof setTimeout> | undefined;

function say(text: string, kind: string): void {
  if (!flash) return;
  flash.textContent = text;
  flash.className = kind;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => {
    flash.textContent = '';
    flash.className = '';
  }, 8000);
}

function formatAge(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

function readClock(): void {
  const el = main?.querySelector('[data-now]');
  if (el) offsetMs = Date.parse(el.getAttribute('data-now') ?? '') - Date.now();
}

function tickAges(): void {
  const now = Date.now() + offsetMs;
  for (const el of document.querySelectorAll('[data-pulse-at]')) {
    const at = Date.parse(el.getAttribute('data-pulse-at') ?? '');
    if (!isNaN(at)) el.textContent = formatAge(now - at);
  }
}

let refreshing = false;
let again = false;
let lastAt = 0;
let timer: ReturnType<typeof setTimeout> | null = null;

function scheduleRefresh(): void {
  if (timer) return;
  const wait = Math.max(0, lastAt + 500 - Date.now());
  timer = setTimeout(() => {
    timer = null;
    refresh();
  }, wait);
}

/** Which steps' <details> are open, by step id: a refresh keeps them as the user left them. */
function openDetails(root: HTMLElement): Map<string, boolean> {
  const open = new Map<string, boolean>();
  for (const details of root.querySelectorAll<HTMLDetailsElement>('[data-step] details')) {
    const step = details.closest('[data-step]')?.getAttribute('data-step');
    if (step != null) open.set(step, details.open);
  }
  return open;
}

function restoreDetails(root: HTMLElement, open: Map<string, boolean>): void {
  for (const details of root.querySelectorAll<HTMLDetailsElement>('[data-step] details')) {
    const step = details.closest('[data-step]')?.getAttribute('data-step');
    const was = step == null ? undefined : open.get(step);
    if (was !== undefined) details.open = was;
  }
}

function updatePoisoned(count: string | null): void {
  const link = document.querySelector('header nav a[href="/poisoned"]');
  if (!link || count === null) return;
  let badge = document.getElementById('nav-poisoned');
  if (count === '0') {
    badge?.remove();
    return;
  }
  if (!badge) {
    badge = document.createElement('span');
    badge.id = 'nav-poisoned';
    badge.className = 'count';
    link.appendChild(document.createTextNode(' '));
    link.appendChild(badge);
  }
  badge.textContent = count;
}

function refresh(): void {
  if (!main) return;
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = true;
  lastAt = Date.now();
  fetch(location.pathname + location.search, {
    headers: { 'X-Sonar-Fragment': '1' },
    credentials: 'same-origin',
  })
    .then((r) => {
      if (r.status === 401) {
        location.href = `/login?next=${encodeURIComponent(location.pathname + location.search)}`;
        return null;
      }
      updatePoisoned(r.headers.get('X-Sonar-Poisoned'));
      return r.text();
    })
    .then((text) => {
      if (text === null) return;
      const open = openDetails(main);
      main.innerHTML = text;
      restoreDetails(main, open);
      readClock();
      tickAges();
      document.dispatchEvent(new CustomEvent('sonar:refreshed'));
    })
    .catch(() => {})
    .then(() => {
      refreshing = false;
      if (again) {
        again = false;
        scheduleRefresh();
      }
    })
    .catch(() => {});
}

// Events page: the live tail.
let paused = false;
let held: TailEvent[] = [];
const MAX_ROWS = 500;

function cell(tr: HTMLTableRowElement, text: string, cls: string): HTMLTableCellElement {
  const td = document.createElement('td');
  if (cls) td.className = cls;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function addEvent(e: TailEvent): void {
  const rows = document.getElementById('event-rows') as HTMLTableSectionElement | null;
  if (!rows) return;
  if (paused) {
    held.push(e);
    if (held.length > MAX_ROWS) held.shift();
    const status = document.getElementById('tail-status');
    if (status) status.textContent = `${held.length} new while paused`;
    return;
  }
  const tr = document.createElement('tr');
  tr.setAttribute('data-seq', String(e.seq));
  tr.setAttribute('data-type', e.type);
  cell(tr, String(e.seq), 'num');
  const t = cell(tr, '', '');
  const time = document.createElement('time');
  time.textContent = String(e.time).slice(11, 23);
  time.title = e.time;
  t.appendChild(time);
  cell(tr, e.subject, 'mono subject');
  const typeCell = cell(tr, '', '');
  const badge = document.createElement('span');
  badge.className = `badge st-${String(e.type).replace(/[^A-Za-z]/g, '')}`;
  badge.textContent = e.type;
  typeCell.appendChild(badge);
  const data = cell(tr, '', '');
  for (const [k, v] of Object.entries(e.data ?? {})) {
    const f = document.createElement('span');
    f.className = 'field';
    const key = document.createElement('span');
    key.className = 'k';
    key.textContent = k;
    const val = document.createElement('span');
    val.className = 'v';
    val.textContent = typeof v === 'string' ? v : JSON.stringify(v);
    f.appendChild(key);
    f.appendChild(document.createTextNode('='));
    f.appendChild(val);
    data.appendChild(f);
    data.appendChild(document.createTextNode(' '));
  }
  rows.insertBefore(tr, rows.firstChild);
  while (rows.rows.length > MAX_ROWS) rows.deleteRow(-1);
}

document.addEventListener('click', (ev) => {
  const target = ev.target;
  if (!(target instanceof Element)) return;
  if (target.id === 'pause') {
    paused = !paused;
    target.textContent = paused ? 'Resume' : 'Pause';
    if (!paused) {
      const list = held;
      held = [];
      list.forEach(addEvent);
      const status = document.getElementById('tail-status');
      if (status) status.textContent = '';
    }
    return;
  }
  const btn = target.closest<HTMLButtonElement>('button[data-action]');
  if (!btn) return;
  const url = btn.getAttribute('data-action') ?? '';
  const question = btn.getAttribute('data-confirm');
  const askReason = /\/cancel$/.test(url);
  if (question) confirmThen(question, askReason, (reason) => act(btn, url, reason));
  else act(btn, url, '');
});

function confirmThen(question: string, askReason: boolean, go: (reason: string) => void): void {
  const dialog = document.getElementById('confirm') as HTMLDialogElement | null;
  const reason = document.getElementById('confirm-reason') as HTMLInputElement | null;
  const text = document.getElementById('confirm-text');
  if (!dialog || !reason || !text) return;
  text.textContent = question;
  reason.value = '';
  if (reason.parentElement) reason.parentElement.hidden = !askReason;
  dialog.returnValue = '';
  dialog.onclose = () => {
    dialog.onclose = null;
    if (dialog.returnValue === 'ok') go(reason.value);
  };
  dialog.showModal();
}

function summary(url: string, out: ActionAnswer): string {
  if (/\/retry$/.test(url)) return `retried ${out.task} (round ${out.round})`;
  if (out.task && out.step !== undefined) return `cancelled ${out.task}`;
  const what = out.taskId ? `${out.runId}.${out.taskId}` : `run ${out.runId}`;
  return `cancelled ${what}: ${out.cancelled} task(s)`;
}

function act(btn: HTMLButtonElement, url: string, reason: string): void {
  btn.disabled = true;
  fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(reason ? { reason } : {}),
    credentials: 'same-origin',
  })
    .then((r) => r.json().then((json: ActionAnswer) => ({ ok: r.ok, json })))
    .then((r) => {
      if (r.ok) say(summary(url, r.json), 'ok');
      else say(r.json.error?.message || 'refused', 'error');
      scheduleRefresh();
    })
    .catch((err: unknown) => say(String(err), 'error'))
    .then(() => {
      btn.disabled = false;
    })
    .catch(() => {});
}

readClock();
setInterval(tickAges, 1000);

if (streamUrl && typeof EventSource === 'function') {
  const es = new EventSource(streamUrl);
  let opened = false;
  es.onopen = () => {
    if (live) {
      live.textContent = 'live';
      live.className = 'live on';
    }
    // Changes may have been missed while disconnected.
    if (opened) scheduleRefresh();
    opened = true;
  };
  es.onerror = () => {
    if (live) {
      live.textContent = 'reconnecting';
      live.className = 'live off';
    }
  };
  es.addEventListener('change', scheduleRefresh);
  es.addEventListener('event', (m) => addEvent(JSON.parse(m.data as string) as TailEvent));
  es.addEventListener('gap', (m) => {
    const gap = JSON.parse(m.data as string) as { dropped: number };
    say(`${gap.dropped} events skipped (the tail could not keep up)`, 'error');
  });
}

export {};
