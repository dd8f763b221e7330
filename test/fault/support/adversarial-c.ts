/**
 * Support for the adversarial class 5/7 scenarios: a KEEL_HOME written by Keel before the
 * hardening merge (rebuilt from `.dump`s of the databases that commit 657384d's CLI wrote
 * with memory and skills), a `keel` run under a file-size limit (a full disk), and readers
 * of schema versions and turn outcomes.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { DatabaseSync } from "node:sqlite";
import type { KeelEvent } from "../../../packages/kernel/src/index.ts";
import { KEEL_BIN, REPO } from "./storage.ts";

/** Import specifier of the skills plugin's sources, for a config in a temp folder. */
export const SKILLS = pathToFileURL(join(REPO, "packages/plugin-skills/src/index.ts")).href;

const V1 = join(dirname(fileURLToPath(import.meta.url)), "adversarial-c-v1");

/** The session the pre-merge home holds (one completed turn: "I live in Lisbon and my dog is Rex."). */
export const V1_SESSION = "b3fd65c5-d7ab-42f8-b294-204969979d57";
export const V1_INPUT = "I live in Lisbon and my dog is Rex.";

/** Schema versions as the pre-merge code left them (`.dump` does not keep user_version). */
const V1_VERSIONS: Record<string, number> = { sessions: 1, memory: 1, skills: 0 };

/** Write the pre-merge databases (sessions v1 without leases, memory v1, skills v0 with raw streaks) into `home`. */
export function writeV1Home(home: string, only: readonly string[] = ["sessions", "memory", "skills"]): void {
  mkdirSync(home, { recursive: true });
  for (const name of only) {
    const db = new DatabaseSync(join(home, `${name}.sqlite`));
    try {
      db.exec(readFileSync(join(V1, `${name}.sql`), "utf8"));
      db.exec(`PRAGMA user_version=${V1_VERSIONS[name]}`);
    } finally {
      db.close();
    }
  }
}

/** `PRAGMA user_version` and table names of a database. */
export function schemaOf(path: string): { version: number; tables: string[] } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const version = (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
    const tables = db
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
      .all()
      .map((r) => String((r as { name: unknown }).name));
    return { version, tables };
  } finally {
    db.close();
  }
}

/** Rows of a query on a database (read-only). */
export function rows(path: string, sql: string): Array<Record<string, unknown>> {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare(sql).all() as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
}

/** `keel args…` with every file it writes limited to `kib` KiB (bash `ulimit -f`): a full disk. */
export function runKeelFileLimited(
  kib: number,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now();
  const child = spawn("bash", ["-c", `ulimit -f ${kib} && exec "$0" "$@"`, process.execPath, KEEL_BIN, ...args], {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0 });
    }),
  );
}

/** Per turn id: its terminal events (turn.completed / failed / interrupted), in log order. */
export function terminalsByTurn(events: readonly KeelEvent[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const e of events) {
    if (e.type === "turn.started" && e.turnId) out.set(e.turnId, out.get(e.turnId) ?? []);
    if ((e.type === "turn.completed" || e.type === "turn.failed" || e.type === "turn.interrupted") && e.turnId)
      out.set(e.turnId, [...(out.get(e.turnId) ?? []), e.type]);
  }
  return out;
}
