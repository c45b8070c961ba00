/** The end of `sonar --help`: where to start, and what every networked verb shares. */
export const HELP_FOOTER = `
Start here:
  sonar dev --demo                  a local server, backend and workers, and a sample run
  sonar dev                         the same, kept running for your own runs
  sonar submit run.json --wait      submit a run and follow it to its end
  sonar status                      workers, capacity, runs, leader

Networked verbs take --server URL (or SONAR_NATS_URL, default nats://127.0.0.1:4222) and
--prefix P (or SONAR_PREFIX, default sonar). Every SONAR_* setting is an environment
variable; \`sonar backend --help\` lists them all as flags.
Exit codes: 0 ok, 1 failure (a failed run, an unreachable server), 2 usage or validation.
Contract: DESIGN.md (contract version 1). \`sonar <verb> --help\` for each verb.`;
