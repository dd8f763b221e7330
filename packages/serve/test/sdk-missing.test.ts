/**
 * The protocols' SDKs are optional peers: a project that has not installed one gets
 * KEEL_PACKAGE_MISSING naming the package and the command, before a server starts. The scenario
 * is real: a copy of this package's source in a project folder outside the repository whose
 * node_modules holds its Keel dependencies and zod but neither SDK, run by plain Node; then the
 * same project with @a2a-js/sdk linked in, where the A2A side loads and the MCP side still
 * names its package.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const PACKAGE = join(import.meta.dirname, "..");
const root = mkdtempSync(join(tmpdir(), "keel-serve-sdk-"));
const app = join(root, "app");

/** node_modules/<name> in the project → the copy this package resolves. */
function link(name: string): void {
  const target = realpathSync(join(PACKAGE, "node_modules", name));
  mkdirSync(dirname(join(app, "node_modules", name)), { recursive: true });
  symlinkSync(target, join(app, "node_modules", name));
}

beforeAll(() => {
  mkdirSync(join(app, "node_modules"), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // The package's source as a project would hold it (outside node_modules, so Node strips its types).
  cpSync(join(PACKAGE, "src"), join(app, "serve", "src"), { recursive: true });
  writeFileSync(join(app, "serve", "package.json"), JSON.stringify({ name: "serve-copy", type: "module" }));
  for (const name of ["@keel/kernel", "@keel/agent", "@keel/stream", "@keel/text", "zod"]) link(name);
  writeFileSync(
    join(app, "load.ts"),
    `import { loadA2a, loadMcp, startMcpHttp } from "./serve/src/index.ts";
const out: Record<string, unknown> = {};
const attempts: Array<[string, () => Promise<unknown>]> = [
  ["a2a", loadA2a],
  ["mcp", loadMcp],
  // Rejected before it reads its options: nothing is built, nothing listens.
  ["startMcpHttp", () => startMcpHttp({} as never)],
];
for (const [name, attempt] of attempts) {
  try {
    await attempt();
    out[name] = "loaded";
  } catch (err) {
    const e = err as { code?: string; message: string; location?: { path?: string } };
    out[name] = { code: e.code, message: e.message, path: e.location?.path };
  }
}
process.stdout.write(JSON.stringify(out));
`,
  );
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Outcome = "loaded" | { code?: string; message: string; path?: string };

function loadInProject(): Record<"a2a" | "mcp" | "startMcpHttp", Outcome> {
  const r = spawnSync(process.execPath, ["load.ts"], {
    cwd: app,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", NODE_OPTIONS: "" },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe("a project without the protocols' SDKs", () => {
  it("is told which package each server needs and how to add it", () => {
    const out = loadInProject();
    expect(out.a2a).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "@a2a-js/sdk" });
    expect((out.a2a as { message: string }).message).toContain(
      "needs the package @a2a-js/sdk, which is not installed in this project: run `npm install @a2a-js/sdk`",
    );
    for (const name of ["mcp", "startMcpHttp"] as const) {
      expect(out[name], name).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "@modelcontextprotocol/sdk" });
      expect((out[name] as { message: string }).message, name).toContain("run `npm install @modelcontextprotocol/sdk`");
    }
  });

  it("once @a2a-js/sdk is installed, the A2A server loads; MCP still names its package", () => {
    link("@a2a-js/sdk");
    const out = loadInProject();
    expect(out.a2a).toBe("loaded");
    expect(out.mcp).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "@modelcontextprotocol/sdk" });
  });
});
