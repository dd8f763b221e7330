/**
 * Support for the Unicode and unbounded-input fault scenarios: a throwaway KEEL_HOME with an
 * agent config whose tools return what a scenario needs (emoji, lone surrogates, 20 MB), the
 * real `keel` binary pointed at the wire server, and readers for what reached the provider
 * and what is on disk.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { pathToFileURL } from "node:url";
import { isWellFormed } from "../../../packages/text/src/index.ts";
import type { WireServer } from "../../../packages/wire-server/src/index.ts";
import { offlineEnv, REPO, runKeel } from "../../../packages/cli/test/support/run-keel.ts";
import type { KeelRun } from "../../../packages/cli/test/support/run-keel.ts";

export { REPO };

/** What the config's `emit` tool returns, chosen per run by FAULT_TOOL. */
export type ToolMode = "emoji" | "lone" | "huge" | "none";

const CONFIG = `
const memoryUrl = ${JSON.stringify(pathToFileURL(join(REPO, "packages", "plugin-memory", "src", "index.ts")).href)};
const env = process.env;
const HIGH = String.fromCharCode(0xd83d);
const LOW = String.fromCharCode(0xde00);
function output() {
  switch (env.FAULT_TOOL) {
    case "emoji": {
      // Astral characters (surrogate pairs), a ZWJ family and combining marks at every offset.
      const parts = ["a", "😀", "👨‍👩‍👧", "é", "日本", "🎉", " ", "𝔘"];
      let s = "";
      for (let i = 0; s.length < Number(env.FAULT_EMOJI_UNITS ?? 3000); i++) s += parts[(i * 5 + (i >> 2)) % parts.length];
      return s;
    }
    case "lone":
      return "before " + HIGH + " middle " + LOW + " after 😀";
    case "huge": {
      const mb = Number(env.FAULT_HUGE_MB ?? 20);
      return "HEAD-OF-RESULT\\n" + "0123456789abcdef ".repeat(Math.floor((mb * 1024 * 1024) / 17)) + "\\nTAIL-OF-RESULT";
    }
    default:
      return "nothing";
  }
}
const emit = { name: "emit", description: "Returns the text under test.", parameters: { type: "object", properties: {} }, execute: () => output() };
const bundled = {
  name: "bundler",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_tool_materialization", () => ({ kind: "tool_bundle", bundleId: "plugin-tools", tools: [{ name: "plugin_emit", description: "A plugin's tool returning the text under test.", parameters: { type: "object", properties: {} }, execute: () => output() }] }));
  },
};
const plugins = [env.FAULT_PLUGIN_TOOL === "1" && bundled];
if (env.FAULT_MEMORY) {
  const { memory } = await import(memoryUrl);
  plugins.push(memory({ path: env.FAULT_MEMORY, extraction: "off", tools: false, recall: { itemChars: Number(env.FAULT_ITEM_CHARS ?? 500) } }));
}
export default {
  name: "fault-unicode",
  model: env.FAULT_MODEL ?? "anthropic:claude-sonnet-4-6",
  instructions: "You are terse.",
  tools: [emit],
  plugins,
  ...(env.FAULT_MAX_RESULT ? { limits: { maxToolResultChars: Number(env.FAULT_MAX_RESULT) } } : {}),
};
`;

/** A throwaway folder with the config and a KEEL_HOME. */
export interface FaultHome {
  dir: string;
  home: string;
  config: string;
  cleanup(): void;
}

export function makeHome(prefix = "keel-fault-unicode-"): FaultHome {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const config = join(dir, "agent.config.mjs");
  writeFileSync(config, CONFIG);
  const home = join(dir, "home");
  return { dir, home, config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Env for a run against the wire server: Anthropic (default) or OpenAI. */
export function wireEnv(server: WireServer, h: FaultHome, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return offlineEnv({
    KEEL_HOME: h.home,
    ANTHROPIC_API_KEY: "sk-test",
    ANTHROPIC_BASE_URL: server.anthropicBaseURL,
    OPENAI_API_KEY: "sk-test",
    OPENAI_BASE_URL: server.openaiBaseURL,
    ...extra,
  });
}

/** `keel run` with the fault config; also how long it took. */
export async function keelRun(h: FaultHome, env: NodeJS.ProcessEnv, args: string[]): Promise<KeelRun & { ms: number }> {
  const t0 = performance.now();
  const run = await runKeel(["run", "--config", h.config, ...args], { cwd: h.dir, env });
  return { ...run, ms: performance.now() - t0 };
}

/** `keel chat` with the fault config, `lines` on stdin. */
export async function keelChat(
  h: FaultHome,
  env: NodeJS.ProcessEnv,
  lines: string[],
  args: string[] = [],
): Promise<KeelRun & { ms: number }> {
  const t0 = performance.now();
  const run = await runKeel(["chat", "--config", h.config, ...args], { cwd: h.dir, env, stdin: lines });
  return { ...run, ms: performance.now() - t0 };
}

/** Every string in `v`, deep. */
export function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) for (const x of v) strings(x, out);
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) out.push(k), strings(x, out);
  return out;
}

/** True when no string in `v` holds a lone surrogate. */
export function wellFormedDeep(v: unknown): boolean {
  return strings(v).every((s) => isWellFormed(s));
}

/** The session ids and stored events of a KEEL_HOME's sessions.sqlite (read-only). */
export function storedEvents(home: string): Array<{ session: string; type: string; data: string }> {
  const db = new DatabaseSync(join(home, "sessions.sqlite"), { readOnly: true });
  try {
    return db.prepare("SELECT session_id AS session, type, data FROM events ORDER BY session_id, seq").all() as Array<{
      session: string;
      type: string;
      data: string;
    }>;
  } finally {
    db.close();
  }
}

/** The session id a run printed in its closing line (`… · session ID`). */
export function sessionIdOf(run: KeelRun): string {
  const m = /session (\S+)/.exec(run.stderr);
  if (!m) throw new Error(`no session id in stderr:\n${run.stderr}`);
  return m[1]!;
}

/** The requests the wire server got since index `from`, and their raw JSON size. */
export function requestsSince(server: WireServer, from: number) {
  return server.requests.slice(from).map((r) => ({ ...r, size: JSON.stringify(r.body ?? "").length }));
}
