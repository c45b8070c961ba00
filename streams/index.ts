export * from './names.js';
export * from './ids.js';
export * from './errors.js';
export * from './topology.js';
export * from './provision.js';
export * from './envelope.js';
export * from './event-store.js';
export * from './jsonl.js';
