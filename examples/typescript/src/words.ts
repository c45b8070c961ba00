// What the client and the worker agree on: the run's steps, the tag they go to, and the
// shapes of inputs and outputs. Both import this file, so a change is a compile error on
// both sides rather than a failed task.
import type { RunFile } from '@sonar-dispatch/sonar';
import { z } from 'zod';

/** The routing tag: only workers that joined with it get these tasks. */
export const TAG = 'words';

/** A `count` task's input, checked by the worker before its handler runs. */
export const countInput = z.object({ text: z.string().min(1) });
export type CountInput = z.infer<typeof countInput>;

export interface CountOutput {
  words: number;
  longest: string;
}

export interface ReportOutput {
  texts: number;
  words: number;
  longest: string;
}

/**
 * Two steps: `count` (one task per text, at most 2 at once), then `report` (one task, once
 * every `count` task succeeded), which sums what `count` wrote.
 */
export function wordsRun(runId: string, texts: readonly string[]): RunFile {
  const tasks = texts.map((text, i) => ({ id: `t${i}`, input: { text } satisfies CountInput }));
  return {
    runId,
    steps: [
      { id: 'count', tags: [TAG], output: 'json', maxConcurrent: 2, tasks },
      { id: 'report', tags: [TAG], output: 'json', after: ['count'], tasks: [{ id: 'sum' }] },
    ],
  };
}
