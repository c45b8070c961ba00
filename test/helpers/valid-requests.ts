/**
 * One valid request per API verb, the least each schema accepts: what the payload tests
 * (bad-payload, fuzz) mutate into invalid ones. A verb added to the protocol must be added
 * here, or the Record type says so.
 */
import type { Verb } from '../../src/protocol.js';

/** The attempt that the attempt verbs' requests name. */
export const attempt = { runId: 'r1', taskId: 't1', attemptId: 'a1', token: 'tok', workerId: 'w1' };
const PUBLIC_KEY = 'UDVPD2BGZCODEIBX5DJAQZFKRNTG2RRCVULITRXT4PBTP6DFA4Y5JEVG';

export const VALID_REQUESTS: Readonly<Record<Verb, unknown>> = {
  join: { workerId: 'w1', host: 'h', tags: ['linux'], slots: 2 },
  start: attempt,
  result: { ...attempt, output: { inline: 'aGk=', bytes: 2 } },
  fail: { ...attempt, exitCode: 1, error: 'boom', retryable: true },
  release: attempt,
  drain: { workerId: 'w1', reason: 'shutdown' },
  leave: { workerId: 'w1' },
  exited: { workerId: 'w1', code: 1 },
  'submit.begin': {
    runId: 'r1',
    hash: 'h',
    steps: [{ id: 's', tags: ['linux'], taskCount: 1 }],
    taskCount: 1,
  },
  'submit.tasks': { runId: 'r1', stepId: 's', tasks: [{ id: 't1' }] },
  'submit.commit': { runId: 'r1' },
  cancel: { runId: 'r1' },
  enroll: { workerId: 'w1', publicKey: PUBLIC_KEY },
  renew: { workerId: 'w1', publicKey: PUBLIC_KEY },
  revoke: { workerId: 'w1' },
  'poisoned.list': { runId: 'r1' },
  'poisoned.show': { runId: 'r1', taskId: 't1' },
  'poisoned.retry': { runId: 'r1', taskId: 't1', by: 'ops@host' },
  'poisoned.cancel': { runId: 'r1', taskId: 't1', reason: 'x' },
  sweep: {},
  progress: { ...attempt, value: 0.5 },
  log: { ...attempt, seq: 1, parts: [{ stream: 'stderr', text: 'hello\n' }] },
  batch: { workerId: 'w1', requests: [{ verb: 'start', body: attempt }] },
  'schedule.create': {
    name: 'nightly',
    cron: '0 2 * * *',
    run: { steps: [{ id: 's', tags: ['linux'], tasks: [{ id: 't1' }] }] },
  },
  'schedule.list': {},
  'schedule.pause': { name: 'nightly' },
  'schedule.resume': { name: 'nightly' },
  'schedule.delete': { name: 'nightly' },
  'schedule.trigger': { name: 'nightly', requestId: 'req1' },
};
