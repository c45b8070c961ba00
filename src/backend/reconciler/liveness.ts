/**
 * What `/healthz` asks: each component that can get stuck in a way only a restart mends
 * registers a check that names the problem, or returns null while all is well. An outage is
 * never such a problem: a restart does not bring the server back, and liveness restarts of
 * every backend at once would only add to it.
 */
export class Liveness {
  private readonly checks = new Map<string, () => string | null>();

  /** Registers (or replaces) the check called `name`; returns the unregister function. */
  register(name: string, check: () => string | null): () => void {
    this.checks.set(name, check);
    return () => {
      if (this.checks.get(name) === check) this.checks.delete(name);
    };
  }

  /** The problems found now, by check name; empty when live. */
  problems(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, check] of this.checks) {
      const problem = check();
      if (problem !== null) out[name] = problem;
    }
    return out;
  }
}
