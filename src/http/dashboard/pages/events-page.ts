import { EVENT_TYPES } from '../../../../actors/events.js';
import type { EventFilter } from '../event-filter.js';
import { html } from '../html.js';
import type { Html } from '../html.js';
import type { PublicEvent } from '../views/public-event.js';
import { badge, time } from './format.js';
import { fieldsOf } from './task-page.js';

/** One row of the tail; the client builds the same shape for live events (with textContent). */
export function eventRow(e: PublicEvent): Html {
  return html`<tr data-seq="${e.seq}" data-type="${e.type}">
    <td class="num">${e.seq}</td>
    <td>${time(e.time)}</td>
    <td class="mono subject">${e.subject}</td>
    <td>${badge(e.type)}</td>
    <td>${fieldsOf(e)}</td>
  </tr>`;
}

/** The Events page's `<main>`: the filter form and the tail, newest first. */
export function eventsMain(filter: EventFilter, recent: PublicEvent[]): Html {
  return html`<form class="filters" method="get" action="/events" id="event-filters">
      <label
        >run <input name="run" value="${filter.run ?? ''}" pattern="[A-Za-z0-9_-]{1,64}"
      /></label>
      <label
        >task <input name="task" value="${filter.task ?? ''}" pattern="[A-Za-z0-9_-]{1,64}"
      /></label>
      <label
        >type
        <select name="type">
          <option value="">any</option>
          ${EVENT_TYPES.map(
            (t) => html`<option value="${t}" ${t === filter.type ? 'selected' : ''}>${t}</option>`,
          )}
        </select>
      </label>
      <button type="submit">Filter</button>
      <button type="button" id="pause">Pause</button>
      <span class="muted" id="tail-status"></span>
    </form>
    <table id="events" class="events">
      <thead>
        <tr>
          <th>seq</th>
          <th>time</th>
          <th>subject</th>
          <th>type</th>
          <th>data</th>
        </tr>
      </thead>
      <tbody id="event-rows">
        ${[...recent].reverse().map(eventRow)}
      </tbody>
    </table>`;
}
