/**
 * HTML built only through the `html` tag: every interpolated value is escaped unless it is
 * already `Html` (made by this tag or by `raw`). So task errors, ids, worker hosts and event
 * data, which all come from outside, can never inject markup (no XSS).
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Escapes text for element content and quoted attribute values alike. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

/** A value an `html` template accepts: arrays are joined, null/undefined/false render nothing. */
export type HtmlValue = Html | string | number | boolean | null | undefined | HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** The template tag: `html\`<td>${task.error}</td>\`` escapes `task.error`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Trusted markup, for constants only (never for data). */
export const raw = (markup: string): Html => new Html(markup);
