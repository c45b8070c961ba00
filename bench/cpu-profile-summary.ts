/**
 * Where a `node --cpu-prof` profile spent its time: busy share, self time by area (a
 * package, a source folder of ours, node internals, GC) and the top functions by self time.
 *   node --import tsx bench/cpu-profile-summary.ts FILE.cpuprofile [--top 25]
 * Used for the notes in docs/benchmarks.md (`npm run bench:e2e -- --prof DIR`).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** A coarse owner of a frame: `@nats-io/nats-core`, `src/backend`, `node:internal`, `(gc)`. */
const OUR_FOLDERS = new Set(['actors', 'streams', 'src', 'bench', 'test']);

function areaOf(url: string, name: string): string {
  if (url === '') return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node:internal';
  // Ours, wherever the checkout lives: the last of our top folders in the path, plus the
  // folder below it when there is one (src/backend, actors/reconciler, streams).
  const parts = url.split('/');
  const top = parts.findLastIndex((p, i) => OUR_FOLDERS.has(p) && i < parts.length - 1);
  if (top < 0) return url.replace(/^file:\/\//, '');
  return top + 2 < parts.length ? `${parts[top]}/${parts[top + 1]}` : parts[top]!;
}

export function summarize(p: Profile, top = 25) {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const totalUs = p.endTime - p.startTime;
  let idleUs = 0;
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const area = areaOf(url, functionName);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const file = url.split('/').slice(-2).join('/');
    const key = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
    fns.set(key, (fns.get(key) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => ({ name: k, ms: Math.round(us / 1000), ofBusy: us / busyUs }));
  return {
    wallMs: Math.round(totalUs / 1000),
    busyMs: Math.round(busyUs / 1000),
    areas: rank(areas),
    functions: rank(fns),
  };
}

if (process.argv[1]?.endsWith('cpu-profile-summary.ts')) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: cpu-profile-summary.ts FILE.cpuprofile [--top N]');
  const i = process.argv.indexOf('--top');
  const s = summarize(
    JSON.parse(readFileSync(file, 'utf8')) as Profile,
    i === -1 ? 25 : Number(process.argv[i + 1]),
  );
  console.log(`${file}: wall ${s.wallMs} ms, busy ${s.busyMs} ms`);
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`.padStart(6);
  console.log('\nself time by area');
  for (const a of s.areas)
    console.log(`${pct(a.ofBusy)} ${String(a.ms).padStart(7)} ms  ${a.name}`);
  console.log('\nself time by function');
  for (const f of s.functions)
    console.log(`${pct(f.ofBusy)} ${String(f.ms).padStart(7)} ms  ${f.name}`);
}
