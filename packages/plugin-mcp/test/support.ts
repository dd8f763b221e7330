/** Shared helpers of the plugin-mcp tests: real server commands, temp dirs, process checks. */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import type { CatalogEntry } from "../src/index.ts";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** The JS entry of an installed server package's bin (run with process.execPath, not npx). */
export function serverBin(pkg: "server-everything" | "server-filesystem" | "server-memory"): string {
  return join(dirname(require.resolve(`@modelcontextprotocol/${pkg}/package.json`)), "dist", "index.js");
}

/** A stdio server config running a fixture script of test/fixtures. */
export function fixture(name: string, env?: Record<string, string>) {
  return { command: process.execPath, args: [join(here, "fixtures", name)], ...(env ? { env } : {}) };
}

/** Temp dirs removed by `cleanup()`. */
export function tempDirs() {
  const dirs: string[] = [];
  return {
    make(prefix = "keel-mcp-"): string {
      const d = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(d);
      return d;
    },
    cleanup(): void {
      for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
    },
  };
}

/** True while a process with that pid exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True while a process with that pid runs (Linux: a zombie, ended but not yet reaped, does not run). */
export function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch {
    return process.platform !== "linux";
  }
}

/** Wait until `check()` is true (polling), or fail after `ms`. */
export async function until(check: () => boolean, ms = 10_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Connection settings for tests: quick restarts. */
export const SETTINGS = {
  clientName: "keel-test",
  clientVersion: "0.0.0",
  connectTimeoutMs: 15_000,
  restart: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 },
};

/** Pids of this process's child processes (Linux /proc), for orphan checks. */
export function childPids(): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid) out.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** A catalog entry of server `server`'s tool `tool`, exposed as `mcp__<server>__<tool>`. */
export const entry = (server: string, tool: string, description: string): CatalogEntry => ({
  name: `mcp__${server}__${tool}`,
  server,
  tool,
  description,
});
