/** Helpers shared by the kernel's tests. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import type { KeelEvent, Message, ToolDefinition, UserMessage } from "../../src/index.ts";
import { defineTool, isKeelError, messageText } from "../../src/index.ts";
import { defaultSessionDbPath, SqliteSessionStore } from "../../../store-sqlite/src/index.ts";

/** The stored event of one type. */
export type EventOf<T extends KeelEvent["type"]> = Extract<KeelEvent, { type: T }>;

/** Events of one type, typed. */
export function ofType<T extends KeelEvent["type"]>(events: readonly KeelEvent[], type: T): EventOf<T>[] {
  return events.filter((e): e is EventOf<T> => e.type === type);
}

/** A promise with its resolve function. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** The KeelError `fn` throws (or rejects with); fails the test if it throws anything else or nothing. */
export async function keelErrorOf(fn: () => unknown): Promise<Error & { code: string }> {
  try {
    await fn();
  } catch (err) {
    if (isKeelError(err)) return err;
    throw err;
  }
  throw new Error("expected a KeelError, nothing was thrown");
}

/** Event seqs run 1..n without gaps. */
export function expectContiguousSeqs(events: readonly KeelEvent[]): void {
  expect(events.length).toBeGreaterThan(0);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
}

/** A plain user message. */
export function userMsg(text: string): UserMessage {
  return { role: "user", content: [{ type: "text", text }] };
}

/** A tool named `ping` that counts its calls and answers "pong". */
export function pingTool(counter: { n: number }): ToolDefinition {
  return defineTool({ name: "ping", description: "Answers pong.", execute: () => (counter.n++, "pong") });
}

/**
 * Temporary agent homes and the SQLite stores opened on them; `cleanup()` closes the stores
 * and deletes the folders (call it in afterEach).
 */
export function tempHomes(prefix: string): {
  fresh(): string;
  open(home: string): SqliteSessionStore;
  cleanup(): void;
} {
  const dirs: string[] = [];
  const stores: SqliteSessionStore[] = [];
  return {
    fresh() {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    open(home) {
      const store = new SqliteSessionStore({ path: defaultSessionDbPath(home) });
      stores.push(store);
      return store;
    },
    cleanup() {
      for (const s of stores.splice(0)) s.close();
      for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
    },
  };
}

/**
 * Pair tool calls with results: every call has exactly one result, after its assistant
 * message and before the next one; no result lacks a call. Returns id → result message.
 */
export function pairResults(
  messages: readonly Message[],
): Map<string, { text: string; isError: boolean; name: string }> {
  const out = new Map<string, { text: string; isError: boolean; name: string }>();
  const calls: string[] = [];
  let open = new Set<string>();
  for (const m of messages) {
    if (m.role === "assistant") {
      expect([...open], "calls left without a result before the next assistant message").toEqual([]);
      open = new Set(m.content.flatMap((b) => (b.type === "tool_call" ? [b.id] : [])));
      calls.push(...open);
    } else if (m.role === "tool") {
      expect(open.has(m.toolCallId), `result ${m.toolCallId} has no open call`).toBe(true);
      expect(out.has(m.toolCallId), `second result for ${m.toolCallId}`).toBe(false);
      open.delete(m.toolCallId);
      out.set(m.toolCallId, { text: messageText(m), isError: m.isError, name: m.toolName });
    } else {
      expect([...open], "a user message came between a call and its result").toEqual([]);
    }
  }
  expect([...open]).toEqual([]);
  expect([...out.keys()].sort()).toEqual([...calls].sort());
  return out;
}
