import type { RunFile } from '../protocol.js';
import type { WorkerSpec } from './supervisor.js';

/** How long the demo's commands sleep, in seconds; `--fast` shortens them for CI. */
export interface DemoPace {
  fetchS: number;
  processS: number;
}

export const demoPace = (fast: boolean): DemoPace =>
  fast ? { fetchS: 0.3, processS: 1.2 } : { fetchS: 1, processS: 3 };

/**
 * The three local workers of `sonar dev`, with different tags and slots: `io` work goes only
 * to the first, `gpu` only to the third, `linux` to all three. More workers repeat the list.
 */
export function devWorkerSpecs(count: number): WorkerSpec[] {
  const base: WorkerSpec[] = [
    { tags: ['io', 'linux'], slots: 3 },
    { tags: ['linux'], slots: 2 },
    { tags: ['linux', 'gpu'], slots: 1 },
  ];
  return Array.from({ length: count }, (_, i) => ({
    ...base[i % base.length]!,
    args: ['--no-spot'],
  }));
}

const sh = (script: string, ...args: string[]): string[] => ['sh', '-c', script, 'sh', ...args];

/**
 * The demo's run: three steps.
 * - `fetch` (tag io): 6 tasks, at most 2 at once (`maxConcurrent`), though its worker has 3 slots.
 * - `process` (tag linux, `after: fetch`): 8 tasks on every worker; `p3` fails on its first
 *   try (a marker file under .sonar/ says whether it ran before) and succeeds on the retry.
 *   The demo kills a worker while these run, to show the recovery.
 * - `report` (tag gpu, `after: process`): one task.
 */
export function demoRunFile(runId: string, markerFile: string, pace: DemoPace): RunFile {
  const fetch = Array.from({ length: 6 }, (_, i) => ({
    id: `f${i}`,
    command: sh(`sleep ${pace.fetchS}; echo '{"page":${i}}'`),
  }));
  const process = Array.from({ length: 8 }, (_, i) => ({
    id: `p${i}`,
    command:
      i === 3
        ? sh(
            `if [ -e "$1" ]; then sleep ${pace.processS}; echo '{"item":${i},"retried":true}'; ` +
              `else touch "$1"; echo 'simulated failure on the first try' >&2; exit 3; fi`,
            markerFile,
          )
        : sh(`sleep ${pace.processS}; echo '{"item":${i}}'`),
  }));
  return {
    runId,
    steps: [
      { id: 'fetch', tags: ['io'], maxConcurrent: 2, output: 'json', tasks: fetch },
      { id: 'process', tags: ['linux'], after: ['fetch'], output: 'json', tasks: process },
      {
        id: 'report',
        tags: ['gpu'],
        after: ['process'],
        output: 'json',
        tasks: [{ id: 'r0', command: sh(`echo '{"report":"${runId}"}'`) }],
      },
    ],
  };
}
