// The throwaway nats-server that tests use is the same code `sonar dev` runs its server with.
export * from '../../src/dev/nats-server.js';
