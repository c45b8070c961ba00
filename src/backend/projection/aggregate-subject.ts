import type { AggregateRef } from '../../../actors/events.js';
import type { Names } from '../../../streams/names.js';

/** The events subject of an aggregate, from its projection key (`<runId>.<id>`, `<workerId>`). */
export function aggregateSubject(n: Names, ref: AggregateRef): string {
  const dot = ref.key.indexOf('.');
  const [runId, id] = dot < 0 ? [ref.key, ''] : [ref.key.slice(0, dot), ref.key.slice(dot + 1)];
  switch (ref.kind) {
    case 'task':
      return n.subjects.task(runId, id);
    case 'step':
      return n.subjects.step(runId, id);
    case 'run':
      return n.subjects.run(ref.key);
    case 'worker':
      return n.subjects.worker(ref.key);
    case 'system':
      return n.subjects.system(ref.key);
    case 'schedule':
      return n.subjects.schedule(ref.key);
  }
}
