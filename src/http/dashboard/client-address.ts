import type { IncomingMessage } from 'node:http';

/**
 * The address a request came from, for per-client limits. With no trusted proxy it is the
 * socket's peer: `X-Forwarded-For` is the client's to write, so it is ignored. Behind
 * `trustedProxies` proxies that each append the address they saw, the client is that many
 * entries from the right; the entries left of it are the client's own claims. A shorter
 * header (a request that skipped a proxy) gives its leftmost entry.
 */
export function clientAddress(req: IncomingMessage, trustedProxies: number): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  if (trustedProxies === 0) return peer;
  const header = req.headers['x-forwarded-for'];
  const entries = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) return peer;
  return entries[Math.max(0, entries.length - trustedProxies)]!;
}
