/** The projection component's entrance: what the rest of Sonar may use of it. */
export { DecisionWriter } from './decision-writer.js';
export type { DecisionOutcome } from './decision-writer.js';
export { EventWriter } from './event-writer.js';
export type { Command, Written } from './event-writer.js';
export { ProjectionLoop } from './projection-loop.js';
export type { ProjectionStoppedError } from './projection-loop.js';
