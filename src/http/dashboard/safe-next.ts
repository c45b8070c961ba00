const BASE = 'http://sonar.invalid';

/**
 * Where to go after a login: `next` when it is a path on this origin, else `/` (no open
 * redirect). Browsers drop tabs and newlines from URLs and read `\` as `/`, so `/\t/evil.com`
 * and `/\evil.com` both mean `//evil.com`, another site: only printable ASCII without a
 * backslash is taken, never starting `//`, and it must still resolve to this origin.
 */
export function safeNext(next: string | null): string {
  if (next === null || !/^\/[\x21-\x7e]*$/.test(next)) return '/';
  if (next.startsWith('//') || next.includes('\\')) return '/';
  try {
    const url = new URL(next, BASE);
    return url.origin === BASE && url.pathname.startsWith('/') ? next : '/';
  } catch (_err: unknown) {
    return '/';
  }
}
