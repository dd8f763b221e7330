/**
 * @keel/store-kit: what every Keel session store shares. The lease protocol's client side
 * (takeLease over a store's three primitives), the storage redaction (each event's free text
 * redacted, its identifiers kept byte for byte), and JSON that never throws on odd values.
 */
export { HANDOFF_WAIT_MS, holderIsDead, takeLease } from "./lease.ts";
export type { LeaseClaim, LeaseOutcome, LeasePrimitives, SessionLease } from "./lease.ts";
export { redactEvent, redactForStorage } from "./redact.ts";
export { toJson } from "./json.ts";
export { turnStateChange, turnStateChanges } from "./turn-state.ts";
export type { TurnState, TurnStateChange } from "./turn-state.ts";
