/**
 * An application bundled for Node (esbuild, platform node: how many apps ship to a server or a
 * function host). createAgent on Node loads @keel/agent/node by a name the bundler does not
 * follow, so at run time it is either missing or found in node_modules: another copy of the host
 * than the one in the bundle, which installs its runtime into that copy. Neither may leave the
 * agent keeping its log in memory on Node: createAgent says which import fixes it, and with that
 * import the bundled agent keeps its log in SQLite in KEEL_HOME.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import { ROOT } from "./support/bundle.ts";

/** An app that builds an agent with no store and says where its log went. */
const APP = `import { createAgent } from "@keel/agent";
const provider = {
  id: "inline", contextWindow: 8000,
  async *stream() {
    const message = { role: "assistant", content: [{ type: "text", text: "hi" }] };
    yield { type: "response", message, stopReason: "end_turn", usage: { inputTokens: 1, outputTokens: 1 } };
  },
};
const agent = await createAgent({ provider });
const session = await agent.session();
await session.run("hello");
console.log(JSON.stringify({ home: agent.storage.home, store: agent.store.constructor.name }));
await agent.close();
`;

/**
 * Two agents of the app contend for one session: the second turn must get KEEL_SESSION_BUSY,
 * told from a crash by the bundle's kernel though a store loaded from node_modules threw it.
 */
const CONTEND = `import { createAgent, isKeelError } from "@keel/agent";
const provider = {
  id: "inline", contextWindow: 8000,
  async *stream() {
    await new Promise((r) => setTimeout(r, 300));
    const message = { role: "assistant", content: [{ type: "text", text: "hi" }] };
    yield { type: "response", message, stopReason: "end_turn", usage: { inputTokens: 1, outputTokens: 1 } };
  },
};
const a = await createAgent({ provider, lease: { waitMs: 0 } });
const b = await createAgent({ provider, lease: { waitMs: 0 } });
const first = await a.session();
const one = first.run("one");
// The first turn holds the session (its model takes 300 ms) when the other agent opens it and runs.
await new Promise((r) => setTimeout(r, 100));
const second = await b.session(first.id);
const runs = await Promise.allSettled([one, second.run("two")]);
await a.close();
await b.close();
console.log(JSON.stringify({
  store: a.store.constructor.name,
  runs: runs.map((r) => r.status === "fulfilled" ? r.value.verdict.status : { code: r.reason.code, keel: isKeelError(r.reason, "KEEL_SESSION_BUSY") }),
}));
`;

// Inside the repository, so node_modules resolves @keel/agent as an installed app's would.
const inside = mkdtempSync(join(ROOT, "test/runtime/.node-bundle-"));
// Where @keel/store-postgres is installed too.
const besidePostgres = mkdtempSync(join(ROOT, "packages/agent/.node-bundle-"));
const outside = mkdtempSync(join(tmpdir(), "keel-node-bundle-"));
afterAll(async () => {
  for (const dir of [inside, besidePostgres, outside]) rmSync(dir, { recursive: true, force: true });
  await dropTestSchemas();
});

/** Bundle `app` (after `head`) for Node into `dir`/app.mjs and run it with a fresh KEEL_HOME (and `env`). */
async function bundleAndRun(
  dir: string,
  head = "",
  app = APP,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string; home: string }> {
  // The source sits where @keel/agent resolves (the bundle may go where it does not).
  const source = join(dir === outside ? inside : dir, "app.ts");
  writeFileSync(source, head + app);
  await build({
    entryPoints: [source],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: join(dir, "app.mjs"),
    logLevel: "silent",
  });
  const home = join(dir, "home");
  mkdirSync(home, { recursive: true });
  const r = spawnSync(process.execPath, [join(dir, "app.mjs")], {
    env: { ...process.env, KEEL_HOME: home, KEEL_DATABASE_URL: "", ...env },
    encoding: "utf8",
    timeout: 50_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, home };
}

describe("an app bundled for Node", () => {
  it("that imports @keel/agent/node in its entry: createAgent with no store writes SQLite in KEEL_HOME", async () => {
    const r = await bundleAndRun(inside, `import "@keel/agent/node";\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ home: r.home, store: "SqliteSessionStore" });
    expect(existsSync(join(r.home, "sessions.sqlite"))).toBe(true);
  });

  it("with @keel/agent installed beside it but not imported: KEEL_STORE_FAILED naming the other copy and the import, no turn kept in memory", async () => {
    const r = await bundleAndRun(inside);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("KEEL_STORE_FAILED");
    expect(r.stderr).toContain("another copy of @keel/agent");
    expect(r.stderr).toContain('import "@keel/agent/node"');
  });

  it("with no @keel/agent to load: KEEL_STORE_FAILED saying to import @keel/agent/node, not to pass a store", async () => {
    const r = await bundleAndRun(outside);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("KEEL_STORE_FAILED");
    expect(r.stderr).toContain('import "@keel/agent/node"');
    expect(r.stderr).not.toContain("pass createAgent a store");
  });

  it("on PostgreSQL (KEEL_DATABASE_URL: @keel/store-postgres and its kernel come from node_modules): a session held by one agent is KEEL_SESSION_BUSY to another, and the app closes cleanly", async () => {
    await requirePostgres();
    const r = await bundleAndRun(besidePostgres, `import "@keel/agent/node";\n`, CONTEND, {
      KEEL_DATABASE_URL: PG_URL,
      KEEL_DATABASE_SCHEMA: testSchema(),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      store: "PostgresSessionStore",
      runs: ["completed", { code: "KEEL_SESSION_BUSY", keel: true }],
    });
  });
});
