/**
 * Structured redaction of what an agent stores: guarded reads of plugin and tool values, and a
 * message or content block redacted as the session log stores it (text scanned, inline media and
 * thinking kept, a tool call's arguments as data). The session store and the kernel's content
 * digests share it, so a digest is of exactly what is stored.
 */
import { redact, redactData } from "./scan.ts";

/** Block types whose `data` is inline media a provider reads back (base64, not text). */
export const MEDIA_BLOCK_TYPES: ReadonlySet<string> = new Set(["image", "document", "file", "audio"]);
const MEDIA = MEDIA_BLOCK_TYPES;

/** `obj[key]`, or "[unreadable]" when reading it throws (a getter or Proxy from plugin or tool code). */
export function readField(obj: object, key: string): unknown {
  try {
    return (obj as Record<string, unknown>)[key];
  } catch {
    return "[unreadable]";
  }
}

/** A shallow copy of a plain object's own fields, each read inside a guard; undefined for a non-object. */
export function guardedFields(v: unknown): Record<string, unknown> | undefined {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
  try {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) out[k] = readField(v, k);
    return out;
  } catch {
    return undefined;
  }
}

/** Prose as stored. Contract: a string is scanned whole (redact); anything else as caller data. */
export function redactText(v: unknown): unknown {
  return typeof v === "string" ? redact(v) : redactData(v);
}

/** Each item of an array through `f`; anything else as caller data. */
export function redactEach(v: unknown, f: (item: unknown) => unknown): unknown {
  if (!Array.isArray(v)) return redactData(v);
  try {
    return v.map((item) => f(item));
  } catch {
    return "[unreadable]";
  }
}

/** One content block: text scanned, inline media and thinking kept whole, a tool call's arguments as data. */
export function redactBlock(v: unknown): unknown {
  const b = guardedFields(v);
  if (!b) return redactData(v);
  switch (b.type) {
    case "text":
      return { ...b, text: redactText(b.text) };
    case "thinking":
      // A provider rejects an edited thinking block (its signature covers the text).
      return v;
    case "tool_call":
      return { ...b, args: redactData(b.args, "args") };
    default:
      if (typeof b.type === "string" && MEDIA.has(b.type))
        return { ...b, ...(b.name !== undefined ? { name: redactText(b.name) } : {}) };
      return redactData(v);
  }
}

const redactedMessages = new WeakMap<object, unknown>();

/**
 * A message as the session log stores it.
 * Contract: never throws, never mutates `v`; its blocks go through redactBlock. A frozen message
 * (the kernel freezes every message it keeps) is redacted once: the store's write and the
 * kernel's request digest share the result, which is frozen.
 */
export function redactMessage(v: unknown): unknown {
  const frozen = v !== null && typeof v === "object" && Object.isFrozen(v);
  if (frozen) {
    const hit = redactedMessages.get(v);
    if (hit !== undefined) return hit;
  }
  const m = guardedFields(v);
  const out = m ? { ...m, content: redactEach(m.content, redactBlock) } : redactData(v);
  if (frozen) redactedMessages.set(v as object, Object.freeze(out));
  return out;
}
