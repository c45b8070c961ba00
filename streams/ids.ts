// Id validation lives in the pure core so that both the machines and the wire share it.
export { ID_RE, assertId, isId } from '../actors/ids.js';
