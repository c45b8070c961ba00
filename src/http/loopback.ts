import { isIP } from 'node:net';

/**
 * Whether a host name or IP literal names this machine only: `localhost`, 127.0.0.0/8 and
 * `::1` (also written `[::1]`, in full, or as the IPv4-mapped `::ffff:127.x.y.z`). Any other
 * IP literal, `0.0.0.0` and `::` included, reaches (or binds) beyond this machine.
 */
export function isLoopback(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const lower = h.toLowerCase();
  if (lower === 'localhost') return true;
  const family = isIP(lower);
  if (family === 4) return lower.startsWith('127.');
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return mapped[1]!.startsWith('127.');
  return isIpv6One(lower);
}

/** `::1` in any spelling: seven zero groups, then 1. */
function isIpv6One(ip: string): boolean {
  const [head = '', tail] = ip.split('::');
  const part = (s: string) => (s === '' ? [] : s.split(':'));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return (
    groups.length === 8 &&
    groups.slice(0, 7).every((g) => /^0+$/.test(g)) &&
    Number.parseInt(groups[7]!, 16) === 1
  );
}
