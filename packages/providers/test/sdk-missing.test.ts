/**
 * The SDKs are optional peers: a project that has not installed one gets KEEL_PROVIDER_SDK_MISSING
 * naming the package to add, when the model is resolved, before any request. The scenario is
 * real: a copy of this package's source in a project folder outside the repository, whose
 * node_modules holds @keel/kernel and nothing else, run by plain Node (with a NODE_PATH that
 * holds both SDKs, which Node's import() ignores); then the same project
 * with @anthropic-ai/sdk linked in, which resolves and answers (the wire server) while `openai`
 * is still refused.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const PACKAGE = join(import.meta.dirname, "..");
const root = mkdtempSync(join(tmpdir(), "keel-sdk-missing-"));
const app = join(root, "app");
let wire: WireServer;

beforeAll(async () => {
  wire = await startWireServer();
  mkdirSync(join(app, "node_modules", "@keel"), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // The package's source as a project would hold it (outside node_modules, so Node strips its types).
  cpSync(join(PACKAGE, "src"), join(app, "providers", "src"), { recursive: true });
  writeFileSync(join(app, "providers", "package.json"), JSON.stringify({ name: "providers-copy", type: "module" }));
  symlinkSync(realpathSync(join(PACKAGE, "..", "kernel")), join(app, "node_modules", "@keel", "kernel"));
  writeFileSync(
    join(app, "resolve.ts"),
    `import { resolveModel, sdkInstalled } from "./providers/src/index.ts";
const out: Record<string, unknown> = { installed: { anthropic: sdkInstalled("@anthropic-ai/sdk"), openai: sdkInstalled("openai") } };
for (const spec of ["anthropic:claude-sonnet-4-6", "openai:gpt-4o", "openai-compatible:llama3.1"]) {
  try {
    const provider = resolveModel(spec, { apiKey: "k", baseURL: process.env.WIRE_URL });
    let text = "";
    const request = { system: "", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], tools: [], options: {} };
    for await (const e of provider.stream(request as never, { signal: new AbortController().signal })) if (e.type === "text_delta") text += e.text;
    out[spec] = { text };
  } catch (err) {
    const e = err as { code?: string; message: string; location?: { path?: string } };
    out[spec] = { code: e.code, message: e.message, path: e.location?.path };
  }
}
process.stdout.write(JSON.stringify(out));
`,
  );
});
afterAll(async () => {
  await wire?.close();
  rmSync(root, { recursive: true, force: true });
});

type Outcome = { code?: string; message?: string; path?: string; text?: string };

/** Run resolve.ts in the project with plain Node (not waited on synchronously: the wire server answers from this process); what each spec gave. */
async function resolveInProject(): Promise<
  Record<string, Outcome> & { installed: { anthropic: boolean; openai: boolean } }
> {
  const { stdout } = await promisify(execFile)(process.execPath, ["resolve.ts"], {
    cwd: app,
    encoding: "utf8",
    // NODE_PATH names a folder holding both SDKs (pnpm sets one like it for its scripts):
    // `import()` does not read it, so neither may the check.
    env: {
      PATH: process.env.PATH ?? "",
      WIRE_URL: wire.openaiBaseURL,
      NODE_OPTIONS: "",
      NODE_PATH: join(dirname(dirname(dirname(realpathSync(join(PACKAGE, "node_modules", "openai"))))), "node_modules"),
    },
  });
  return JSON.parse(stdout);
}

describe("a project without the provider SDKs", () => {
  it("is told, per model spec, which package to install and how, before any request", async () => {
    const from = wire.requests.length;
    const out = await resolveInProject();
    expect(out.installed).toEqual({ anthropic: false, openai: false });
    const anthropic = out["anthropic:claude-sonnet-4-6"]!;
    expect(anthropic.code).toBe("KEEL_PROVIDER_SDK_MISSING");
    expect(anthropic.path).toBe("model");
    expect(anthropic.message).toContain("anthropic:claude-sonnet-4-6 is served by the package @anthropic-ai/sdk");
    expect(anthropic.message).toContain("run `npm install @anthropic-ai/sdk`");
    for (const spec of ["openai:gpt-4o", "openai-compatible:llama3.1"]) {
      expect(out[spec]!.code, spec).toBe("KEEL_PROVIDER_SDK_MISSING");
      expect(out[spec]!.message, spec).toContain(`${spec} is served by the package openai`);
      expect(out[spec]!.message, spec).toContain("run `npm install openai`");
    }
    expect(wire.requests.length).toBe(from);
  });

  it("once @anthropic-ai/sdk is installed, an anthropic: model answers; openai: is still refused", async () => {
    // The SDK this repository installs, linked into the project as `npm install` would place it.
    const sdk = dirname(createRequire(join(PACKAGE, "package.json")).resolve("@anthropic-ai/sdk"));
    mkdirSync(join(app, "node_modules", "@anthropic-ai"), { recursive: true });
    symlinkSync(realpathSync(sdk), join(app, "node_modules", "@anthropic-ai", "sdk"));
    wire.enqueue({ text: "hello from the wire" });
    const from = wire.requests.length;
    const out = await resolveInProject();
    expect(out.installed).toEqual({ anthropic: true, openai: false });
    expect(out["anthropic:claude-sonnet-4-6"]).toEqual({ text: "hello from the wire" });
    expect(wire.requests.slice(from).map((r) => r.path)).toEqual(["/v1/messages"]);
    expect(out["openai:gpt-4o"]!.code).toBe("KEEL_PROVIDER_SDK_MISSING");
  });
});
