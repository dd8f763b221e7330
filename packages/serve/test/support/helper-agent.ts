/**
 * The agent the MCP tests serve: a small model of its own (it answers with every user text it
 * was sent, so a test sees whether a turn saw the earlier ones; "note X" calls write_note,
 * which a plugin makes ask for approval; "wait" waits until the turn is cancelled), run by the
 * real `keel serve --mcp` in a child process.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { afterAll } from "vitest";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
export const KEEL_BIN = join(REPO, "packages", "cli", "bin", "keel.js");

/** Env without provider keys or a serve token. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !/_API_KEY$|_BASE_URL$|^KEEL_/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

const CONFIG = (notes: string) => `import { appendFileSync } from "node:fs";
const texts = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join(" ");
const reply = (content, stopReason) => ({ type: "response", message: { role: "assistant", content }, stopReason, usage: { inputTokens: 1, outputTokens: 1 } });
export default {
  name: "helper",
  instructions: "Private: the calendar lives in the vault.",
  description: "Knows the release calendar of the team.",
  model: {
    id: "custom:memo",
    async *stream(request, { signal }) {
      console.log("the model was called");
      const last = request.messages.at(-1);
      if (last.role === "tool") {
        const text = "Done: " + texts(last);
        yield { type: "text_delta", text };
        return yield reply([{ type: "text", text }], "end_turn");
      }
      const said = texts(last);
      if (said.startsWith("wait")) {
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(Object.assign(new Error("aborted"), { name: "AbortError" })), { once: true }));
      }
      if (said.startsWith("note ")) {
        return yield reply([{ type: "tool_call", id: "n" + request.messages.length, name: "write_note", args: { text: said.slice(5) } }], "tool_use");
      }
      const all = request.messages.filter((m) => m.role === "user").map(texts);
      const text = "heard " + all.length + ": " + all.join(" | ");
      yield { type: "text_delta", text };
      yield reply([{ type: "text", text }], "end_turn");
    },
  },
  tools: [{ name: "write_note", description: "Appends a note.", category: "edit", parameters: { type: "object", properties: { text: { type: "string" } } }, execute: ({ text }) => { appendFileSync(${JSON.stringify(notes)}, text + "\\n"); return "wrote " + text; } }],
  plugins: [{ name: "guard", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => e.call.name === "write_note" ? { kind: "tool_decision", decision: "ask", reason: "notes are reviewed" } : undefined); } }],
};
`;

/** A project folder with the helper's config and its own home. */
export interface HelperProject {
  dir: string;
  home: string;
  notes(): string;
  /** The session ids the owners table gives `principal`. */
  owned(): Array<{ session_id: string; principal: string }>;
  /** The types of the events stored for a session. */
  eventTypes(sessionId: string): string[];
}

const made: string[] = [];
afterAll(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A temp folder removed after the test file. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function helperProject(prefix = "keel-serve-"): HelperProject {
  const dir = tempDir(prefix);
  const home = join(dir, "home");
  mkdirSync(home);
  const notes = join(dir, "notes.txt");
  writeFileSync(join(dir, "agent.config.mjs"), CONFIG(notes));
  const query = <T>(file: string, sql: string, ...args: string[]): T[] => {
    const db = new DatabaseSync(join(home, file), { readOnly: true });
    try {
      return db.prepare(sql).all(...args) as T[];
    } finally {
      db.close();
    }
  };
  return {
    dir,
    home,
    notes: () => (existsSync(notes) ? readFileSync(notes, "utf8") : ""),
    owned: () => query("serve.sqlite", "SELECT session_id, principal FROM owners"),
    eventTypes: (id) =>
      query<{ type: string }>("sessions.sqlite", "SELECT type FROM events WHERE session_id = ? ORDER BY seq", id).map(
        (r) => r.type,
      ),
  };
}

/** A running `keel serve …`: its process and what it printed on stderr so far. */
export interface Served {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<number | null>;
}

/** Start `keel serve args…` in the project; resolves once stderr says where it serves (or it exited). */
export async function startServe(
  p: HelperProject,
  args: string[],
  env: Record<string, string> = {},
): Promise<Served & { url?: string }> {
  const child = spawn(process.execPath, [KEEL_BIN, "serve", ...args], {
    cwd: p.dir,
    env: cleanEnv({ KEEL_HOME: p.home, ...env }),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const url = await new Promise<string | undefined>((resolve) => {
    const check = () => {
      const m = /at (http:\/\/\S+\/mcp)/.exec(err);
      if (m) resolve(m[1]);
    };
    child.stderr!.on("data", check);
    void exited.then(() => resolve(undefined));
  });
  return { child, stderr: () => err, exited, ...(url ? { url } : {}) };
}
