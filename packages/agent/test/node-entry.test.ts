/**
 * What loading `@keel/agent/node` does by itself, in a fresh process each time (a module's
 * state is the point: the vitest worker has built agents already): error messages mask
 * connection credentials with the full scanner before any createAgent; and where createAgent
 * loads it by itself.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const NODE_ENTRY = fileURLToPath(new URL("../src/node/index.ts", import.meta.url));
const MAIN_ENTRY = fileURLToPath(new URL("../src/index.ts", import.meta.url));

/** Run `body` (an ES module's code, with `keel` the Node entry's namespace) in a new Node process. */
function fresh(
  body: string,
  entry = NODE_ENTRY,
  env: Record<string, string> = {},
): { code: number | null; stdout: string; stderr: string } {
  const script = `const keel = await import(${JSON.stringify(entry)});\n${body}`;
  const r = spawnSync(process.execPath, ["--no-warnings", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("@keel/agent/node, loaded", () => {
  it("masks connection credentials in error messages with the full scanner before any createAgent", () => {
    // Passwords the kernel's basic rule misses: "/" and "@" in the userinfo, a quoted libpq value.
    const texts = [
      "connect to postgres://keel:sl/ash-8c1f@db.internal/prod failed",
      "connect to postgres://keel:at@sign-8c1f@db.internal/prod failed",
      "connect to host=db password='two words-8c1f' failed",
    ];
    const r = fresh(`const texts = ${JSON.stringify(texts)};
console.log(JSON.stringify(texts.flatMap((t) => [
  keel.errorMessage(new Error(t)),
  keel.maskCredentials(t),
  new keel.KeelError("KEEL_STORE_FAILED", t).message,
])));`);
    expect(r.code, r.stderr).toBe(0);
    const shown = JSON.parse(r.stdout) as string[];
    expect(shown).toHaveLength(9);
    for (const text of shown) {
      expect(text).not.toMatch(/8c1f|sl\/ash|at@sign|two words/);
      expect(text).toMatch(/db\.internal\/prod|host=db/);
    }
  });

  it("is loaded by createAgent wherever Node runs, but not in workerd (whose nodejs_compat sets process.versions.node too)", () => {
    const home = mkdtempSync(join(tmpdir(), "keel-node-entry-"));
    try {
      const storeUnder = (userAgent: string | undefined) => {
        const r = fresh(
          `${userAgent === undefined ? "" : `Object.defineProperty(globalThis, "navigator", { value: { userAgent: ${JSON.stringify(userAgent)} }, configurable: true });\n`}const provider = { id: "p", contextWindow: 8000, async *stream() {} };
const agent = await keel.createAgent({ provider });
console.log(agent.store.constructor.name);
await agent.close();`,
          MAIN_ENTRY,
          { KEEL_HOME: home, KEEL_DATABASE_URL: "" },
        );
        expect(r.code, r.stderr).toBe(0);
        return r.stdout.trim();
      };
      expect(storeUnder(undefined)).toBe("SqliteSessionStore");
      // A DOM emulation in a Node test (jsdom), Deno, Bun: Node packages load there.
      expect(storeUnder("Mozilla/5.0 (linux) AppleWebKit/537.36 (KHTML, like Gecko) jsdom/26.1.0")).toBe(
        "SqliteSessionStore",
      );
      expect(storeUnder("Cloudflare-Workers")).toBe("MemorySessionStore");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
