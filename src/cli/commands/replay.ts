import type { Command } from 'commander';
import { replay } from '../../../actors/replay.js';
import { replayView } from '../../../actors/replay-view.js';
import type { ReplayView } from '../../../actors/replay-view.js';
import { splitLines } from '../../../streams/jsonl.js';
import { readUserFile } from '../context.js';

/** `sonar replay FILE.jsonl [--json]`: fold an event log and print the resulting state. */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .summary('rebuild state from an event log (JSONL) and print it')
    .description(
      "rebuild the state from an event log (JSONL, as `sonar export` writes it) with the backend's own fold, and print it; lines that do not parse and events a machine refuses are listed under skipped. Needs no server.",
    )
    .argument('<file>', 'event log, one event per line (`sonar export` writes one)')
    .option('--json', 'print the state as JSON (DESIGN.md section 8)')
    .action(async (file: string, opts: { json?: boolean }) => {
      const text = await readUserFile(file);
      const { projection, skipped } = replay(splitLines(text));
      const view = replayView(projection, skipped);
      process.stdout.write(opts.json ? `${JSON.stringify(view, null, 2)}\n` : summarize(view));
    });
}

function countStates(records: Record<string, { state: string }>): string {
  const counts = new Map<string, number>();
  for (const { state } of Object.values(records)) counts.set(state, (counts.get(state) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${s} ${n}`).join(', ') || 'none';
}

function summarize(view: ReplayView): string {
  const lines = [
    `runs:    ${countStates(view.runs)}`,
    `steps:   ${countStates(view.steps)}`,
    `tasks:   ${countStates(view.tasks)}`,
    `workers: ${countStates(view.workers)}`,
    `skipped: ${view.skipped.length}`,
    ...view.skipped.map((s) => `  seq ${s.seq}: ${s.reason}`),
  ];
  return `${lines.join('\n')}\n`;
}
