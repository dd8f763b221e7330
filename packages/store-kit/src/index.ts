/**
 * @keel/store-kit: what every Keel session store shares. The lease protocol's client side
 * (takeLease over a store's three primitives), the storage redaction (each event's free text
 * redacted, its identifiers kept byte for byte), and JSON that never throws on odd values.
 * `@keel/store-kit/core` is the same without the redaction (and its secret scanner).
 */
export * from "./core.ts";
export { redactEvent, redactForStorage } from "./redact.ts";
