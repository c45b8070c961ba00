import { asset } from './asset.js';

/**
 * The dashboard's only script, served as `/assets/app.js` (vanilla JS, no build step). Kept as
 * a string in a .ts file so that the server ships as TypeScript alone. What it does:
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
const source = String.raw`(function () {
  'use strict';
  var body = document.body;
  var main = document.getElementById('main');
  var live = document.getElementById('live');
  var flash = document.getElementById('flash');
  var streamUrl = body.getAttribute('data-stream');
  var offsetMs = 0;

  function say(text, kind) {
    if (!flash) return;
    flash.textContent = text;
    flash.className = kind;
    clearTimeout(say.timer);
    say.timer = setTimeout(function () { flash.textContent = ''; flash.className = ''; }, 8000);
  }

  function formatAge(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + 'ms';
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + 's';
    var m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + (s % 60) + 's';
    var h = Math.floor(m / 60);
    return h + 'h ' + (m % 60) + 'm';
  }

  function readClock() {
    var el = main && main.querySelector('[data-now]');
    if (el) offsetMs = Date.parse(el.getAttribute('data-now')) - Date.now();
  }

  function tickAges() {
    var now = Date.now() + offsetMs;
    var els = document.querySelectorAll('[data-pulse-at]');
    for (var i = 0; i < els.length; i++) {
      var at = Date.parse(els[i].getAttribute('data-pulse-at'));
      if (!isNaN(at)) els[i].textContent = formatAge(now - at);
    }
  }

  var refreshing = false;
  var again = false;
  var lastAt = 0;
  var timer = null;

  function scheduleRefresh() {
    if (timer) return;
    var wait = Math.max(0, lastAt + 500 - Date.now());
    timer = setTimeout(function () { timer = null; refresh(); }, wait);
  }

  function openDetails() {
    var open = {};
    var list = main.querySelectorAll('[data-step] details');
    for (var i = 0; i < list.length; i++) {
      open[list[i].closest('[data-step]').getAttribute('data-step')] = list[i].open;
    }
    return open;
  }

  function restoreDetails(open) {
    var list = main.querySelectorAll('[data-step] details');
    for (var i = 0; i < list.length; i++) {
      var step = list[i].closest('[data-step]').getAttribute('data-step');
      if (Object.prototype.hasOwnProperty.call(open, step)) list[i].open = open[step];
    }
  }

  function updatePoisoned(count) {
    var link = document.querySelector('header nav a[href="/poisoned"]');
    if (!link || count === null) return;
    var badge = document.getElementById('nav-poisoned');
    if (count === '0') { if (badge) badge.remove(); return; }
    if (!badge) {
      badge = document.createElement('span');
      badge.id = 'nav-poisoned';
      badge.className = 'count';
      link.appendChild(document.createTextNode(' '));
      link.appendChild(badge);
    }
    badge.textContent = count;
  }

  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    lastAt = Date.now();
    fetch(location.pathname + location.search, {
      headers: { 'X-Sonar-Fragment': '1' },
      credentials: 'same-origin',
    })
      .then(function (r) {
        if (r.status === 401) {
          location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search);
          return null;
        }
        updatePoisoned(r.headers.get('X-Sonar-Poisoned'));
        return r.text();
      })
      .then(function (text) {
        if (text === null || text === undefined) return;
        var open = openDetails();
        main.innerHTML = text;
        restoreDetails(open);
        readClock();
        tickAges();
        document.dispatchEvent(new CustomEvent('sonar:refreshed'));
      })
      .catch(function () {})
      .then(function () {
        refreshing = false;
        if (again) { again = false; scheduleRefresh(); }
      });
  }

  // Events page: the live tail.
  var paused = false;
  var held = [];
  var MAX_ROWS = 500;

  function cell(tr, text, cls) {
    var td = document.createElement('td');
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function addEvent(e) {
    var rows = document.getElementById('event-rows');
    if (!rows) return;
    if (paused) {
      held.push(e);
      if (held.length > MAX_ROWS) held.shift();
      var status = document.getElementById('tail-status');
      if (status) status.textContent = held.length + ' new while paused';
      return;
    }
    var tr = document.createElement('tr');
    tr.setAttribute('data-seq', String(e.seq));
    tr.setAttribute('data-type', e.type);
    cell(tr, String(e.seq), 'num');
    var t = cell(tr, '', '');
    var time = document.createElement('time');
    time.textContent = String(e.time).slice(11, 23);
    time.title = e.time;
    t.appendChild(time);
    cell(tr, e.subject, 'mono subject');
    var typeCell = cell(tr, '', '');
    var badge = document.createElement('span');
    badge.className = 'badge st-' + String(e.type).replace(/[^A-Za-z]/g, '');
    badge.textContent = e.type;
    typeCell.appendChild(badge);
    var data = cell(tr, '', '');
    Object.keys(e.data || {}).forEach(function (k) {
      var v = e.data[k];
      var f = document.createElement('span');
      f.className = 'field';
      var key = document.createElement('span');
      key.className = 'k';
      key.textContent = k;
      var val = document.createElement('span');
      val.className = 'v';
      val.textContent = typeof v === 'string' ? v : JSON.stringify(v);
      f.appendChild(key);
      f.appendChild(document.createTextNode('='));
      f.appendChild(val);
      data.appendChild(f);
      data.appendChild(document.createTextNode(' '));
    });
    rows.insertBefore(tr, rows.firstChild);
    while (rows.rows.length > MAX_ROWS) rows.deleteRow(-1);
  }

  document.addEventListener('click', function (ev) {
    var target = ev.target;
    if (!(target instanceof Element)) return;
    if (target.id === 'pause') {
      paused = !paused;
      target.textContent = paused ? 'Resume' : 'Pause';
      if (!paused) {
        var list = held;
        held = [];
        list.forEach(addEvent);
        var status = document.getElementById('tail-status');
        if (status) status.textContent = '';
      }
      return;
    }
    var btn = target.closest('button[data-action]');
    if (!btn) return;
    var url = btn.getAttribute('data-action');
    var question = btn.getAttribute('data-confirm');
    var askReason = /\/cancel$/.test(url);
    if (question) confirmThen(question, askReason, function (reason) { act(btn, url, reason); });
    else act(btn, url, '');
  });

  function confirmThen(question, askReason, go) {
    var dialog = document.getElementById('confirm');
    var reason = document.getElementById('confirm-reason');
    document.getElementById('confirm-text').textContent = question;
    reason.value = '';
    reason.parentElement.hidden = !askReason;
    dialog.returnValue = '';
    dialog.onclose = function () {
      dialog.onclose = null;
      if (dialog.returnValue === 'ok') go(reason.value);
    };
    dialog.showModal();
  }

  function summary(url, out) {
    if (/\/retry$/.test(url)) return 'retried ' + out.task + ' (round ' + out.round + ')';
    if (out.task && out.step !== undefined) return 'cancelled ' + out.task;
    var what = out.taskId ? out.runId + '.' + out.taskId : 'run ' + out.runId;
    return 'cancelled ' + what + ': ' + out.cancelled + ' task(s)';
  }

  function act(btn, url, reason) {
    btn.disabled = true;
    fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(reason ? { reason: reason } : {}),
      credentials: 'same-origin',
    })
      .then(function (r) {
        return r.json().then(function (json) { return { ok: r.ok, json: json }; });
      })
      .then(function (r) {
        if (r.ok) say(summary(url, r.json), 'ok');
        else say((r.json.error && r.json.error.message) || 'refused', 'error');
        scheduleRefresh();
      })
      .catch(function (err) { say(String(err), 'error'); })
      .then(function () { btn.disabled = false; });
  }

  readClock();
  setInterval(tickAges, 1000);

  if (streamUrl && typeof EventSource === 'function') {
    var es = new EventSource(streamUrl);
    var opened = false;
    es.onopen = function () {
      if (live) { live.textContent = 'live'; live.className = 'live on'; }
      // Changes may have been missed while disconnected.
      if (opened) scheduleRefresh();
      opened = true;
    };
    es.onerror = function () {
      if (live) { live.textContent = 'reconnecting'; live.className = 'live off'; }
    };
    es.addEventListener('change', scheduleRefresh);
    es.addEventListener('event', function (m) { addEvent(JSON.parse(m.data)); });
    es.addEventListener('gap', function (m) {
      say(JSON.parse(m.data).dropped + ' events skipped (the tail could not keep up)', 'error');
    });
  }
})();
`;

export const APP_JS = asset(source);
