#!/usr/bin/env node
/**
 * Writes what `sonar replay --json` and `sonar plan --json` print for every scenario in
 * test/replay/scenarios into a directory, one file per scenario and view, so that two builds
 * can be compared byte for byte (a move that must not change behaviour, say):
 *
 *   node scripts/replay-outputs.mjs --bin OLD_CHECKOUT/bin/sonar.js --out /tmp/before
 *   node scripts/replay-outputs.mjs --out /tmp/after
 *   diff -r /tmp/before /tmp/after
 *
 * Each scenario is planned twice, at one minute and at one day after its last event: once with
 * no worker live, and once with every worker the log saw joining live and pulsing at that clock.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const flag = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1];
};
const bin = flag('bin', join(root, 'bin/sonar.js'));
const out = flag('out', undefined);
const scenarios = flag('scenarios', join(root, 'test/replay/scenarios'));
if (out === undefined) {
  process.stderr.write('usage: replay-outputs.mjs --out DIR [--bin sonar.js] [--scenarios DIR]\n');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

/** Runs the CLI; a refusal's output is compared as well as a success's. */
function sonar(args) {
  try {
    return execFileSync(process.execPath, [bin, ...args], { encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    return `exit ${err.status}\n${err.stdout}${err.stderr}`;
  }
}

function linesOf(file) {
  const lines = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    try {
      lines.push(JSON.parse(line));
    } catch {
      // the scenarios hold unreadable lines on purpose
    }
  }
  return lines;
}

const DAY = 86_400_000;
for (const name of readdirSync(scenarios)
  .filter((f) => f.endsWith('.jsonl'))
  .sort()) {
  const file = join(scenarios, name);
  const base = name.replace(/\.jsonl$/, '');
  writeFileSync(join(out, `${base}.replay.json`), sonar(['replay', file, '--json']));
  const events = linesOf(file).filter((e) => e && typeof e === 'object');
  const last = Math.max(...events.map((e) => Date.parse(e.time)).filter((t) => !Number.isNaN(t)));
  const joined = new Map();
  for (const e of events) {
    const d = e.data;
    if (e.type === 'WorkerJoined' && d && typeof d.workerId === 'string') joined.set(d.workerId, d);
  }
  for (const [label, at] of [
    ['1m', last + 60_000],
    ['1d', last + DAY],
  ]) {
    const now = new Date(at).toISOString();
    const live = [...joined.values()].map((d) => ({
      workerId: d.workerId,
      host: typeof d.host === 'string' ? d.host : 'host',
      tags: Array.isArray(d.tags) ? d.tags : [],
      slots: Number.isInteger(d.slots) && d.slots > 0 ? d.slots : 1,
      active: true,
      pulseAt: now,
      running: [],
    }));
    for (const [who, entries] of [
      ['none', []],
      ['joined', live],
    ]) {
      const liveFile = join(out, '.live.json');
      writeFileSync(liveFile, JSON.stringify(entries));
      const text = sonar(['plan', file, '--live', liveFile, '--now', now, '--json']);
      writeFileSync(join(out, `${base}.plan-${label}-${who}.json`), text);
    }
  }
}
process.stdout.write(`${out}: ${readdirSync(out).length - 1} outputs\n`);
