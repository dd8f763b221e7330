/**
 * @keel/store-kit/core: the part of the store kit that runs anywhere (no secret scanner): the
 * lease protocol's client side, who this process is, turn-state changes, JSON that never throws.
 * The in-memory store of `@keel/agent` builds on it in a Worker or a browser tab.
 */
export { HANDOFF_WAIT_MS, holderIsDead, takeLease } from "./lease.ts";
export type { LeaseClaim, LeaseOutcome, LeasePrimitives, SessionLease } from "./lease.ts";
export { toJson } from "./json.ts";
export { turnStateChange, turnStateChanges } from "./turn-state.ts";
export type { TurnState, TurnStateChange } from "./turn-state.ts";
export { PROCESS_ID, processGone, processInstance, thisHost } from "./runtime.ts";
export { isTransientStoreError } from "./transient.ts";
