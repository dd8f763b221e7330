/** The memory tools, bound to one turn's namespace: search, list, get, remember, forget. */
import { defineTool, errorMessage } from "@keel/kernel";
import { truncate } from "@keel/text";
import type { ToolDefinition } from "@keel/kernel";
import { z } from "zod";
import { recall } from "./recall.ts";
import { looksSecret, onlySecret, redactSecrets } from "./secrets.ts";
import type { Memory, MemoryStore } from "./types.ts";

const Scope = z.enum(["user", "project", "global"]);

/** One memory as a line of text; secret-like content is hidden unless `showSecrets`. */
export function renderMemory(m: Memory, showSecrets = false, maxChars = 500): string {
  const date = new Date(m.occurredAt).toISOString().slice(0, 10);
  const meta = [`#${m.id}`, m.scope, m.category, m.key ? `key=${m.key}` : undefined, date].filter(Boolean).join(" ");
  const content =
    !showSecrets && looksSecret(m.content) ? "[hidden: secret-like content]" : truncate(m.content, maxChars);
  return `[${meta}] ${content}`;
}

/** What the tools of one turn are bound to. */
export interface ToolBinding {
  store: MemoryStore;
  namespace: string;
  /** False when the turn's policy forbids memory writes. */
  canWrite: boolean;
  showSecrets: boolean;
  sessionId: string;
  turnId: string;
}

const fail = (text: string) => ({ content: text, isError: true });

/**
 * The five memory tools.
 * Contract: every tool reads and writes only `binding.namespace`, whatever its arguments say.
 */
export function memoryTools(b: ToolBinding): ToolDefinition[] {
  const guard = async (fn: () => Promise<string | { content: string; isError: boolean }>) => {
    try {
      return await fn();
    } catch (err) {
      return fail(`Error: ${errorMessage(err)}`);
    }
  };
  return [
    defineTool({
      name: "memory_search",
      description:
        "Search long-term memory (facts, preferences and decisions from earlier sessions) by keywords. Returns the best matches with their ids.",
      input: z.strictObject({ query: z.string().min(1).max(2000), limit: z.number().int().min(1).max(20).optional() }),
      category: "info",
      execute: (a) =>
        guard(async () => {
          const hits = await recall(b.store, {
            namespace: b.namespace,
            query: a.query,
            limit: a.limit ?? 8,
            showSecrets: b.showSecrets,
          });
          if (!hits.length) {
            await b.store.logMiss({ namespace: b.namespace, query: a.query, sessionId: b.sessionId, turnId: b.turnId });
            return "No memories match.";
          }
          return hits.map((h) => renderMemory(h.memory, b.showSecrets)).join("\n");
        }),
    }),
    defineTool({
      name: "memory_list",
      description: "List stored memories, newest first, optionally filtered by scope, category or key.",
      input: z.strictObject({
        scope: Scope.optional(),
        category: z.string().max(64).optional(),
        key: z.string().max(128).optional(),
        limit: z.number().int().min(1).max(50).optional(),
        offset: z.number().int().min(0).optional(),
      }),
      category: "info",
      execute: (a) =>
        guard(async () => {
          const rows = await b.store.list({
            namespace: b.namespace,
            ...(a.scope ? { scope: a.scope } : {}),
            ...(a.category ? { category: a.category } : {}),
            ...(a.key ? { key: a.key } : {}),
            limit: a.limit ?? 20,
            offset: a.offset ?? 0,
          });
          return rows.length ? rows.map((m) => renderMemory(m, b.showSecrets)).join("\n") : "No memories stored.";
        }),
    }),
    defineTool({
      name: "memory_get",
      description:
        "Read one memory by its id (as shown by memory_search or memory_list), with its full text and history.",
      input: z.strictObject({ id: z.number().int().positive() }),
      category: "info",
      execute: (a) =>
        guard(async () => {
          const m = await b.store.get(b.namespace, a.id);
          if (!m) return fail(`No memory #${a.id}.`);
          const state = m.forgottenAt
            ? ` (forgotten${m.forgetReason ? `: ${m.forgetReason}` : ""})`
            : m.supersededBy
              ? ` (superseded by #${m.supersededBy})`
              : "";
          return `${renderMemory(m, b.showSecrets, 4000)}${state}\nimportance=${m.importance} confidence=${m.confidence}${m.source.sessionId ? ` source=${m.source.sessionId}` : ""}`;
        }),
    }),
    defineTool({
      name: "memory_remember",
      description:
        "Store a fact for future sessions. Give a stable `key` (e.g. user.favorite_color) when a later fact should replace this one. Never store secrets.",
      input: z.strictObject({
        content: z.string().min(1).max(2000),
        key: z
          .string()
          .regex(/^[A-Za-z0-9_.-]{1,64}$/)
          .optional(),
        category: z.string().min(1).max(64).optional(),
        scope: Scope.optional(),
        importance: z.number().min(0).max(1).optional(),
      }),
      category: "edit",
      execute: (a) =>
        guard(async () => {
          if (!b.canWrite) return fail("Memory writes are off for this turn (the user asked not to remember it).");
          const { text, kinds } = redactSecrets(a.content);
          if (kinds.length && onlySecret(text))
            return fail(
              `Not stored: the content is a secret (${kinds.join(", ")}). Secrets are never stored in memory.`,
            );
          const r = await b.store.write({
            namespace: b.namespace,
            content: text,
            scope: a.scope ?? "user",
            ...(a.key ? { key: a.key } : {}),
            ...(a.category ? { category: a.category } : {}),
            ...(a.importance !== undefined ? { importance: a.importance } : {}),
            confidence: 0.9,
            source: { sessionId: b.sessionId, turnId: b.turnId, via: "tool" },
          });
          const notes = [
            r.duplicate ? "already stored" : "stored",
            r.superseded.length ? `supersedes #${r.superseded.join(", #")}` : "",
            kinds.length ? `secret-like parts redacted (${kinds.join(", ")})` : "",
          ]
            .filter(Boolean)
            .join("; ");
          return `Memory #${r.memory.id} ${notes}.`;
        }),
    }),
    defineTool({
      name: "memory_forget",
      description: "Forget a memory by id: it is never recalled again (kept only for audit).",
      input: z.strictObject({ id: z.number().int().positive(), reason: z.string().max(500).optional() }),
      category: "edit",
      execute: (a) =>
        guard(async () => {
          const m = await b.store.forget(b.namespace, a.id, a.reason ?? "forgotten by the model");
          return m ? `Memory #${a.id} forgotten.` : fail(`No active memory #${a.id}.`);
        }),
    }),
  ];
}
