/**
 * What the session store writes: every string of an event redacted by @keel/secrets, except
 * the parts a provider needs back byte for byte (thinking blocks, provider data, inline image
 * data) and the kernel's own ids. What those exceptions are is decided by the block's shape,
 * never by a key name alone: a tool call's `args` or a plugin's `data` named `id`, `data` or
 * `signature` is redacted like any other string.
 */
import { redact } from "@keel/secrets";

/** Keys whose string values are the kernel's ids and tags (outside tool arguments and plugin data). */
const ID_KEYS = new Set(["id", "toolCallId", "callId", "type", "role", "mediaType"]);
/** Keys under which the values are caller data (tool arguments, plugin data, job payloads): nothing there is kept. */
const DATA_KEYS = new Set(["args", "arguments", "input", "payload", "data", "details", "metadata"]);
/** Block types whose `data` is inline media a provider reads back (base64, not text). */
const MEDIA = new Set(["image", "document", "file", "audio"]);
const MAX_DEPTH = 64;

/**
 * A copy of `value` fit for storage.
 * Contract: never mutates `value` (deep-frozen events are fine) and never throws (a getter
 * that throws stores "[unreadable]"); thinking blocks are kept whole (a provider rejects an
 * edited one), and so are `providerData` and a media block's `data`; ids are kept except
 * inside caller data (`args`, `data`, `payload`, …), where every string is redacted; beyond
 * 64 levels values are kept as they are (cycles end there).
 */
export function redactForStorage(value: unknown, key?: string, depth = 0, inData = false): unknown {
  if (typeof value === "string") return key !== undefined && !inData && ID_KEYS.has(key) ? value : redact(value);
  if (value === null || typeof value !== "object" || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => redactForStorage(v, undefined, depth + 1, inData));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const obj = value as Record<string, unknown>;
  let type: unknown;
  try {
    type = obj.type;
  } catch {
    type = undefined;
  }
  if (!inData && type === "thinking") return value;
  const media = !inData && typeof type === "string" && MEDIA.has(type);
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
    if (!inData && (k === "providerData" || (media && k === "data" && typeof v === "string"))) out[k] = v;
    else out[k] = redactForStorage(v, k, depth + 1, inData || DATA_KEYS.has(k));
  }
  return out;
}
