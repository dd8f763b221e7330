/**
 * Support for the silent-loss and crash scenarios: throwaway homes with a config that loads
 * the real plugins from this repository's sources, the real `keel` binary, and readers for
 * what ended up on disk (the session log, memory.sqlite).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { KeelEvent } from "../../../packages/kernel/src/index.ts";
import { offlineEnv, runKeel } from "../../../packages/cli/test/support/run-keel.ts";
import type { KeelRun } from "../../../packages/cli/test/support/run-keel.ts";

const REPO = resolve(fileURLToPath(new URL("../../..", import.meta.url)));
/** Import specifiers a config in /tmp can use for this repository's packages. */
export const KERNEL = pathToFileURL(join(REPO, "packages/agent/src/node/index.ts")).href;
export const MEMORY = pathToFileURL(join(REPO, "packages/plugin-memory/src/index.ts")).href;

/** A home with an `agent.config.mjs`: `body` is the module after the imports (it must export default). */
export function makeHome(body: string): { dir: string; home: string } {
  const dir = mkdtempSync(join(tmpdir(), "keel-fault-jobs-"));
  writeFileSync(
    join(dir, "agent.config.mjs"),
    `import { defineConfig, definePlugin } from ${JSON.stringify(KERNEL)};\nimport { memory } from ${JSON.stringify(MEMORY)};\n${body}\n`,
  );
  return { dir, home: join(dir, "home") };
}

/** Run `keel` in `dir` with its home; returns the run and how long it took. */
export async function keel(
  dir: string,
  home: string,
  args: string[],
  options: { env?: Record<string, string>; onStderr?: (chunk: string, child: ChildProcess) => void } = {},
): Promise<KeelRun & { ms: number }> {
  const t0 = Date.now();
  const r = await runKeel(args, {
    cwd: dir,
    env: offlineEnv({ KEEL_HOME: home, ...options.env }),
    ...(options.onStderr ? { onStderr: options.onStderr } : {}),
  });
  return { ...r, ms: Date.now() - t0 };
}

/**
 * The session id `keel run` printed on stderr; for a run killed before it printed its summary,
 * pass its home: the id is then the home's only session.
 */
export function sessionOf(run: KeelRun, home?: string): string {
  const m = /session ([0-9a-f-]{36})/.exec(run.stderr);
  if (m) return m[1]!;
  if (home) {
    const ids = [...new Set(allEvents(home).map((e) => e.sessionId))];
    if (ids.length === 1) return ids[0]!;
  }
  throw new Error(`no session id in stderr:\n${run.stderr}`);
}

/** Every event of every session in the home's log. */
export function allEvents(home: string): KeelEvent[] {
  const db = new DatabaseSync(join(home, "sessions.sqlite"), { readOnly: true });
  try {
    return db
      .prepare("SELECT session_id, seq, ts, turn_id, type, data FROM events ORDER BY rowid")
      .all()
      .map((r) => {
        const row = r as Record<string, unknown>;
        return {
          type: row["type"],
          ...(JSON.parse(row["data"] as string) as object),
          sessionId: row["session_id"],
          seq: row["seq"],
          ts: row["ts"],
          turnId: row["turn_id"],
        } as KeelEvent;
      });
  } finally {
    db.close();
  }
}

/** Active memories' contents, and the turns marked extracted. */
export function memories(home: string): { contents: string[]; extracted: string[] } {
  const db = new DatabaseSync(join(home, "memory.sqlite"), { readOnly: true });
  try {
    const contents = db
      .prepare("SELECT content FROM memories ORDER BY id")
      .all()
      .map((r) => String((r as { content: unknown }).content));
    const extracted = db
      .prepare("SELECT turn_id FROM extractions ORDER BY turn_id")
      .all()
      .map((r) => String((r as { turn_id: unknown }).turn_id));
    return { contents, extracted };
  } finally {
    db.close();
  }
}

/** `job.*` events of one key, as `type[:status]` strings. */
export function jobTrail(events: readonly KeelEvent[], key: string): string[] {
  return events
    .filter((e) => e.type.startsWith("job.") && (e as { idempotencyKey?: string }).idempotencyKey === key)
    .map((e) => `${e.type}${"status" in e ? `:${String(e.status)}` : ""}`);
}

/**
 * A config whose memory extraction asks a side model that, with SLOW_EXTRACT=1, prints
 * "extract-started" on stderr and then waits until it is aborted; otherwise it fails at once,
 * so extraction falls back to the deterministic extractor.
 */
export const SLOW_MEMORY_CONFIG = `
const extractor = {
  id: "test:extractor",
  async *stream(_request, { signal }) {
    if (process.env.SLOW_EXTRACT !== "1") throw new Error("extractor offline");
    process.stderr.write("extract-started\\n");
    await new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
  },
};
export default defineConfig({ name: "jobs", plugins: [memory({ model: extractor, extraction: "model" })], offline: { script: { steps: [{ text: "Noted." }, { text: "Noted again." }, { text: "And again." }] } } });
`;
