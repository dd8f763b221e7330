/**
 * What the session store writes: each event with its free text redacted by @keel/secrets and
 * its identifiers kept byte for byte. Which field of which event is free text is one table
 * (STORED), checked by the compiler against the event union: a new event type does not compile
 * until it says how each of its texts is stored. Everything the kernel matches on (call ids,
 * pending and answered lists, session, turn and job ids, idempotency keys, tool and plugin names,
 * enum values) is not in the table, so no redaction can touch it.
 */
import {
  guardedFields as fields,
  MEDIA_BLOCK_TYPES as MEDIA,
  readField as read,
  redactBlock as block,
  redact,
  redactData,
  redactEach as each,
  redactMessage as message,
  redactText as text,
} from "@keel/secrets";
import type { KeelEventData, KeelEventType } from "@keel/kernel";

/**
 * How one field is stored. `text`: prose (what a person, a model or a tool wrote), fully scanned.
 * `data`: structured caller data (tool arguments, a plugin's data, a job payload, metadata):
 * every string is scanned as a value of its field, so a known secret format or a key-named
 * field is redacted and an identifier is kept. The rest name the kernel's composite shapes.
 */
type Rule =
  | "text"
  | "data"
  | "blocks"
  | "message"
  | "edits"
  | "handlers"
  | "handler"
  | "records"
  | "verdict"
  | "manifest";

type Fields<E> = { readonly [K in Exclude<keyof E, "type">]?: Rule };

/** Every event type and its free-text fields; a field not named here is an identifier or a number, stored as it is. */
const STORED: { readonly [T in KeelEventType]: Fields<Extract<KeelEventData, { type: T }>> } = {
  "session.created": {},
  "child.started": {},
  "session.mode": {},
  "session.resumed": {},
  "turn.started": { input: "text", metadata: "data", content: "blocks" },
  "message.appended": { message: "message" },
  "message.queued": { text: "text" },
  "message.dequeued": {},
  "context.edited": { reason: "text", edits: "edits" },
  "context.repaired": {},
  "phase.completed": { handlers: "handlers", contributions: "records" },
  "phase.background": { handler: "handler", contributions: "records" },
  "contributions.merged": { contributions: "records" },
  "prompt.compiled": { manifest: "manifest", system: "text" },
  "model.responded": {},
  "model.failed": { message: "text" },
  "round.answered": { reason: "text" },
  "model.notice": { message: "text", data: "data" },
  "tool.started": { args: "data" },
  "tool.completed": { raw: "message" },
  "preflight.completed": { plan: "text", error: "text" },
  "tools.revealed": { unknown: "data" },
  "guard.tripped": {},
  "approval.requested": { args: "data", reason: "text" },
  "approval.resolved": { reason: "text" },
  "turn.resumed": {},
  diagnostic: { message: "text", data: "data" },
  "job.pending": { payload: "data" },
  "job.started": {},
  "job.deferred": { reason: "text" },
  fault: { message: "text" },
  "job.completed": { error: "text" },
  "turn.completed": { verdict: "verdict" },
  "turn.failed": { verdict: "verdict" },
  "turn.interrupted": { verdict: "verdict" },
  "turn.paused": { verdict: "verdict" },
};

const RULES: Record<Rule, (v: unknown) => unknown> = {
  text,
  data: (v) => redactData(v),
  blocks: (v) => each(v, block),
  message,
  edits: (v) =>
    each(v, (e) => {
      const edit = fields(e);
      if (!edit) return redactData(e);
      return {
        ...edit,
        ...("messages" in edit ? { messages: each(edit.messages, message) } : {}),
        ...("text" in edit ? { text: text(edit.text) } : {}),
      };
    }),
  handler: (v) => {
    const h = fields(v);
    return h && "error" in h ? { ...h, error: text(h.error) } : (h ?? redactData(v));
  },
  handlers: (v) => each(v, RULES.handler),
  records: (v) =>
    each(v, (r) => {
      const rec = fields(r);
      return rec && "reason" in rec ? { ...rec, reason: text(rec.reason) } : (rec ?? redactData(r));
    }),
  verdict: (v) => {
    const verdict = fields(v);
    if (!verdict) return redactData(v);
    return {
      ...verdict,
      ...("message" in verdict ? { message: text(verdict.message) } : {}),
      ...("detail" in verdict ? { detail: text(verdict.detail) } : {}),
    };
  },
  manifest: (v) => {
    const m = fields(v);
    if (!m) return redactData(v);
    const sections = each(m.sections, (s) => {
      const sec = fields(s);
      return sec && "title" in sec ? { ...sec, title: text(sec.title) } : (sec ?? redactData(s));
    });
    return { ...m, sections, options: redactData(m.options, "options") };
  },
};

/**
 * An event's data fit for storage: its free text redacted, its identifiers as they are.
 * Contract: never mutates `data` (deep-frozen events are fine) and never throws; a field whose
 * read throws is stored as "[unreadable]"; an event type the kernel does not know is stored as
 * caller data (every string scanned as a value of its field). `type` defaults to `data.type`
 * (a store that keeps the type in a column of its own passes the rest of the event as `data`).
 */
export function redactEvent(
  data: KeelEventData | Record<string, unknown>,
  type: unknown = read(data, "type"),
): unknown {
  const table =
    typeof type === "string" && Object.hasOwn(STORED, type)
      ? (STORED[type as KeelEventType] as Partial<Record<string, Rule>>)
      : undefined;
  const out = fields(data);
  if (!table || !out) return redactData(data);
  for (const [k, rule] of Object.entries(table)) if (rule && k in out) out[k] = RULES[rule](out[k]);
  return out;
}

/**
 * A value redacted as the session log redacts what it holds: a string as prose; an event (an
 * object with a known `type`) by its table; a message or content block as in an event; any
 * other object field by field, each string as a value of its field.
 * Contract: as redactEvent.
 */
export function redactForStorage(value: unknown): unknown {
  if (typeof value === "string") return redact(value);
  const type = value !== null && typeof value === "object" ? read(value, "type") : undefined;
  return typeof type === "string" && Object.hasOwn(STORED, type)
    ? redactEvent(value as KeelEventData, type)
    : anyValue(value, undefined, 0);
}

const BLOCK_TYPES = new Set(["text", "thinking", "tool_call", ...MEDIA]);

function anyValue(v: unknown, field: string | undefined, depth: number): unknown {
  if (typeof v !== "object" || v === null || depth >= 64) return redactData(v, field);
  if (Array.isArray(v)) return each(v, (x) => anyValue(x, field, depth + 1));
  const o = fields(v);
  if (!o) return redactData(v, field);
  if ((o.role === "user" || o.role === "assistant" || o.role === "tool") && Array.isArray(o.content)) return message(v);
  if (typeof o.type === "string" && BLOCK_TYPES.has(o.type)) return block(v);
  for (const k of Object.keys(o)) o[k] = anyValue(o[k], k, depth + 1);
  return o;
}
