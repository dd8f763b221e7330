/**
 * Support of the class-14 scenarios "child processes end with keel": a config whose MCP servers
 * are the roles of `trust-mcp.mjs` (each carrying the scenario's marker in its argv and writing
 * a pid file), and a look at /proc for what is left of them once `keel` has exited.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { KERNEL } from "./adversarial-a.ts";
import { REPO, until } from "./hangs.ts";

export const SERVER_SCRIPT = join(REPO, "test", "fault", "support", "trust-mcp.mjs");
const PLUGIN_MCP = pathToFileURL(join(REPO, "packages", "plugin-mcp", "src", "index.ts")).href;

/** The roles that never answer: every one must be running before keel is made to exit. */
export const STUCK = ["mute", "stubborn", "wrapper", "grandchild"] as const;

/** What a scenario's config holds besides its servers. */
export interface ChildrenConfig {
  /** The marker every server process carries in its argv, and the folder of their pid files. */
  marker: string;
  dir: string;
  /** Without the `ready` server, session.start waits for the others (until `connectTimeoutMs`). */
  ready: boolean;
  /** Connect timeout of the servers that never answer (ms). */
  stuckConnectTimeoutMs: number;
  /** The MCP plugin's `stopGraceMs` (ms); default: the plugin's (1 s). */
  stopGraceMs?: number;
  /** Offline script steps. */
  script: unknown[];
  /** More module code before the export (plugins, tools), and what goes into `plugins` and `tools`. */
  code?: string;
  plugins?: string;
  tools?: string;
}

/** An agent.config.mjs body: the MCP plugin with the `trust-mcp.mjs` servers, plus what `c` adds. */
export function childrenConfig(c: ChildrenConfig): string {
  const server = (role: string, extra = "") =>
    `{ command: process.execPath, args: [${JSON.stringify(SERVER_SCRIPT)}, "${role}", ${JSON.stringify(c.marker)}, ${JSON.stringify(c.dir)}]${extra} }`;
  const stuck = `, connectTimeoutMs: ${c.stuckConnectTimeoutMs}`;
  return `import { defineConfig, definePlugin } from ${JSON.stringify(KERNEL)};
import { mcp } from ${JSON.stringify(PLUGIN_MCP)};
${c.code ?? ""}
export default defineConfig({
  name: "children",
  plugins: [mcp({ auditPath: false, startGraceMs: 0,${c.stopGraceMs === undefined ? "" : ` stopGraceMs: ${c.stopGraceMs},`} servers: { ${c.ready ? `ready: ${server("ready")}, ` : ""}mute: ${server("mute", stuck)}, stubborn: ${server("stubborn", stuck)}, wrapped: ${server("wrapper", stuck)} } }), ${c.plugins ?? ""}],
  tools: [${c.tools ?? ""}],
  offline: { script: ${JSON.stringify(c.script)} },
});
`;
}

/** Pids by role, from the pid files the servers wrote in `dir`. */
export function startedServers(dir: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const f of readdirSync(dir)) {
    const m = /^([a-z]+)\.(\d+)$/.exec(f);
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), Number(m[2])]);
  }
  return out;
}

/** Resolves once every role in `roles` has written its pid file in `dir`. */
export function serversUp(dir: string, roles: readonly string[] = STUCK, ms = 60_000): Promise<void> {
  return until(() => {
    const up = startedServers(dir);
    return roles.every((r) => up.has(r));
  }, ms);
}

/** Processes (not zombies: those have ended) whose command line holds `marker`: pid and command line. */
export function processesWith(marker: string): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0").join(" ").trim();
      if (!cmd.includes(marker)) continue;
      const stat = readFileSync(`/proc/${e}/stat`, "latin1");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (state !== "Z" && state !== "X") out.push({ pid: Number(e), cmd });
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** What is still running of the scenario after `ms`: empty as soon as nothing is (polled every 25 ms). */
export async function leftAfter(marker: string, ms: number): Promise<Array<{ pid: number; cmd: string }>> {
  const end = performance.now() + ms;
  for (;;) {
    const left = processesWith(marker);
    if (!left.length || performance.now() >= end) return left;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** SIGKILL what is left of a scenario (a failed one), by pid: these are the scenario's own processes. */
export function killLeft(marker: string): void {
  for (const { pid } of processesWith(marker)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
}
