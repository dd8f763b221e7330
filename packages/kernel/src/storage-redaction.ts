/**
 * What the session store writes: every string of an event redacted by @keel/secrets, except
 * the parts a provider needs back byte for byte (thinking blocks and their signatures,
 * provider data, inline image data) and ids.
 */
import { redact } from "@keel/secrets";

/** Keys whose string values are kept as they are: ids, and data a provider checks on replay. */
const KEEP_KEYS = new Set(["id", "toolCallId", "callId", "providerData", "data", "signature", "mediaType", "type", "role"]);
const MAX_DEPTH = 64;

/**
 * A copy of `value` fit for storage.
 * Contract: never mutates `value` (deep-frozen events are fine) and never throws (a getter
 * that throws stores "[unreadable]"); thinking blocks are kept whole (a provider rejects an
 * edited one); beyond 64 levels values are kept as they are (cycles end there).
 */
export function redactForStorage(value: unknown, key?: string, depth = 0): unknown {
  if (typeof value === "string") return key !== undefined && KEEP_KEYS.has(key) ? value : redact(value);
  if (value === null || typeof value !== "object" || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => redactForStorage(v, undefined, depth + 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const obj = value as Record<string, unknown>;
  if (obj.type === "thinking") return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) {
    let v: unknown;
    try {
      v = obj[k];
    } catch {
      // A getter that throws (plugin or tool data): its value cannot be written anyway.
      out[k] = "[unreadable]";
      continue;
    }
    out[k] = KEEP_KEYS.has(k) && typeof v !== "string" ? v : redactForStorage(v, k, depth + 1);
  }
  return out;
}
