/**
 * Support for the adversarial scenarios of classes 2–4 (Unicode, secrets and isolation,
 * unbounded input): a throwaway project whose config's tools return what a scenario asks
 * for through env (many blocks, a huge image, their arguments echoed), the real `keel`
 * binary against the wire server, and raw-bytes searches of every file under KEEL_HOME.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { WireServer } from "../../../packages/wire-server/src/index.ts";
import { pathToFileURL } from "node:url";
import { offlineEnv, REPO, runKeel } from "../../../packages/cli/test/support/run-keel.ts";
import type { KeelRun } from "../../../packages/cli/test/support/run-keel.ts";

const MCP_PLUGIN = pathToFileURL(join(REPO, "packages", "plugin-mcp", "src", "index.ts")).href;
/** The MCP server of these scenarios (halves, huge, leak). */
export const MCP_SERVER = join(REPO, "test", "fault", "support", "adversarial-b-mcp.mjs");

const CONFIG = `
const env = process.env;
const plugins = [];
if (env.FAULT_MCP) {
  const { mcp } = await import(${JSON.stringify(MCP_PLUGIN)});
  plugins.push(mcp({ servers: { adv: { command: process.execPath, args: [env.FAULT_MCP], env: { HUGE_MB: env.FAULT_HUGE_MB ?? "20", LEAK: env.FAULT_LEAK ?? "" } } }, topK: 10 }));
}
function blocks() {
  // FAULT_BLOCKS text blocks of FAULT_BLOCK_CHARS characters each.
  const n = Number(env.FAULT_BLOCKS ?? 1), size = Number(env.FAULT_BLOCK_CHARS ?? 10);
  const content = [];
  for (let i = 0; i < n; i++) content.push({ type: "text", text: (i === 0 ? "FIRST-BLOCK " : i === n - 1 ? "LAST-BLOCK " : "") + "b".repeat(size) });
  return { content };
}
function image() {
  // FAULT_IMAGES images of FAULT_IMAGE_MB megabytes (base64) each, after a caption.
  const n = Number(env.FAULT_IMAGES ?? 1), mb = Number(env.FAULT_IMAGE_MB ?? 1);
  const data = "iVBORw0KGgo" + "A".repeat(Math.floor(mb * 1024 * 1024) - 11);
  return { content: [{ type: "text", text: "the screenshot:" }, ...Array.from({ length: n }, () => ({ type: "image", mediaType: "image/png", data }))] };
}
const tools = [
  { name: "blocks", description: "Returns many text blocks.", parameters: { type: "object", properties: {} }, execute: () => blocks() },
  { name: "image", description: "Returns a screenshot.", parameters: { type: "object", properties: {} }, execute: () => image() },
  { name: "post", description: "Posts data to a URL.", parameters: { type: "object", properties: { url: { type: "string" }, data: {} } }, execute: (args) => "posted " + String(JSON.stringify(args)).length + " characters" },
];
export default {
  name: "fault-adversarial-b",
  model: env.FAULT_MODEL ?? "anthropic:claude-sonnet-4-6",
  // "<LONE>" in FAULT_INSTRUCTIONS stands for a lone high surrogate (an environment cannot carry one).
  instructions: (env.FAULT_INSTRUCTIONS ?? "You are terse.").replace("<LONE>", String.fromCharCode(0xd83d)),
  tools,
  plugins,
  limits: {
    ...(env.FAULT_MAX_RESULT ? { maxToolResultChars: Number(env.FAULT_MAX_RESULT) } : {}),
    ...(env.FAULT_MAX_IMAGE ? { maxToolResultImageBytes: Number(env.FAULT_MAX_IMAGE) } : {}),
  },
};
`;

/** A throwaway folder with the config and a KEEL_HOME. */
export interface Project {
  dir: string;
  home: string;
  config: string;
  cleanup(): void;
}

export function project(): Project {
  const dir = mkdtempSync(join(tmpdir(), "keel-fault-advb-"));
  const config = join(dir, "agent.config.mjs");
  writeFileSync(config, CONFIG);
  return { dir, home: join(dir, "home"), config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `keel run` (or `keel chat` with `stdin` lines) with the project's config against the wire server, and how long it took. */
export async function keel(
  p: Project,
  server: WireServer,
  args: string[],
  env: Record<string, string> = {},
  stdin?: string[],
): Promise<KeelRun & { ms: number }> {
  const t0 = performance.now();
  const full = offlineEnv({
    KEEL_HOME: p.home,
    ANTHROPIC_API_KEY: "sk-test",
    ANTHROPIC_BASE_URL: server.anthropicBaseURL,
    OPENAI_API_KEY: "sk-test",
    OPENAI_BASE_URL: server.openaiBaseURL,
    ...env,
  });
  const run = await runKeel([stdin ? "chat" : "run", "--config", p.config, ...args], {
    cwd: p.dir,
    env: full,
    ...(stdin ? { stdin } : {}),
  });
  return { ...run, ms: performance.now() - t0 };
}

/** Files under `root` whose raw bytes hold any of `needles` (-wal and -shm files included). */
export function filesContaining(root: string, needles: readonly string[]): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(root, { recursive: true }) as string[];
  } catch {
    return out;
  }
  for (const name of names) {
    const p = join(root, name);
    if (!statSync(p).isFile()) continue;
    const bytes = readFileSync(p);
    for (const n of needles) if (bytes.includes(n)) out.push(`${name}: ${n.slice(0, 16)}…`);
  }
  return out;
}
