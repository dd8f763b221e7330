/** Helpers shared by the kernel's tests. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import type { KeelEvent, ToolDefinition, UserMessage } from "../../src/index.ts";
import { defaultSessionDbPath, defineTool, isKeelError, SqliteSessionStore } from "../../src/index.ts";

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
export function tempHomes(prefix: string): { fresh(): string; open(home: string): SqliteSessionStore; cleanup(): void } {
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
