/**
 * What loading `@keel/agent/node` does by itself, in a fresh process each time (a module's
 * state is the point: the vitest worker has built agents already): error messages mask
 * connection credentials with the full scanner before any createAgent.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const NODE_ENTRY = fileURLToPath(new URL("../src/node/index.ts", import.meta.url));

/** Run `body` (an ES module's code, with `keel` the Node entry's namespace) in a new Node process. */
function fresh(body: string): { code: number | null; stdout: string; stderr: string } {
  const script = `const keel = await import(${JSON.stringify(NODE_ENTRY)});\n${body}`;
  const r = spawnSync(process.execPath, ["--no-warnings", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 30_000,
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
});
