/**
 * Whose code is running: every handler, tool, job runner and setup call is run through
 * `inFaultScope`, so a process-level guard can trace an uncaught fault to the plugin (and
 * phase or tool) that scheduled it. The kernel only marks the scopes; carrying one across
 * timers and promises needs the runtime (Node's AsyncLocalStorage), so a host installs a
 * carrier (`@keel/agent/node`'s guardProcess does) and, with none installed, a scope costs
 * nothing.
 */

/** Whose code is running. Contract: set by the kernel around each handler, tool, job runner and setup call. */
export interface FaultScope {
  readonly plugin?: string;
  readonly phase?: string;
  readonly tool?: string;
}

/**
 * What carries a scope across a runtime's asynchronous work (AsyncLocalStorage on Node).
 * Contract: `run` returns and throws exactly what `fn` does; `current` is the innermost scope.
 */
export interface FaultScopeCarrier {
  run<T>(scope: FaultScope, fn: () => T): T;
  current(): FaultScope | undefined;
}

const carriers: FaultScopeCarrier[] = [];

/**
 * Install a carrier while a guard listens. Contract: returns the uninstall function
 * (idempotent); scopes are entered only while at least one carrier is installed.
 */
export function installFaultScopes(carrier: FaultScopeCarrier): () => void {
  carriers.push(carrier);
  let on = true;
  return () => {
    if (!on) return;
    on = false;
    carriers.splice(carriers.indexOf(carrier), 1);
  };
}

/**
 * Run `fn` in the fault scope `scope()` when a carrier is installed, else just run it.
 * Contract: same result and throw as `fn()`; `scope` is only called when a carrier listens.
 */
export function inFaultScope<T>(scope: () => FaultScope, fn: () => T): T {
  const c = carriers[carriers.length - 1];
  return c ? c.run(scope(), fn) : fn();
}

/** Contract: true while a carrier is installed (only then does a fault scope matter); lets a hot path skip building one. */
export function faultScopesActive(): boolean {
  return carriers.length > 0;
}

/** The scope the running code is in, when a carrier is installed. */
export function currentFaultScope(): FaultScope | undefined {
  return carriers[carriers.length - 1]?.current();
}
