/**
 * The examples run online: the real `keel` binary, the official SDKs, and a local server that
 * speaks Anthropic's and OpenAI's wire formats. Keys and base URLs come from the environment,
 * exactly as for a user.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWireServer } from "@keel/wire-server";
import type { WireServer } from "@keel/wire-server";
import { REPO, offlineEnv, runKeel } from "./support/run-keel.ts";

let server: WireServer;
const home = mkdtempSync(join(tmpdir(), "keel-online-"));
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(async () => {
  await server.close();
  rmSync(home, { recursive: true, force: true });
});

describe("keel run against the providers' wire formats", () => {
  it("minimal example on anthropic: tool calls go through the SDK and the answer streams", async () => {
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: "list_files", args: {} }], api: "anthropic" },
      { text: "The project holds NOTES.md and TODO.md.", chunks: 5, api: "anthropic" },
    );
    const run = await runKeel(
      ["run", "--config", join(REPO, "examples", "minimal", "agent.config.ts"), "What files are there?"],
      {
        env: offlineEnv({ KEEL_HOME: home, ANTHROPIC_API_KEY: "sk-test", ANTHROPIC_BASE_URL: server.anthropicBaseURL }),
      },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("keel: model anthropic:claude-sonnet-4-6");
    expect(run.stderr).not.toContain("offline");
    expect(run.stdout).toContain("The project holds NOTES.md and TODO.md.");
    const reqs = server.requests.slice(from);
    expect(reqs.map((r) => r.api)).toEqual(["anthropic", "anthropic"]);
    expect(reqs[0]!.body.tools.map((t: { name: string }) => t.name).sort()).toEqual(["list_files", "read_file"]);
    expect(JSON.stringify(reqs[1]!.body.messages)).toContain("TODO.md");
  });

  it("custom-plugin example on openai: the plugin's deny reaches the model as a tool result", async () => {
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: "delete_note", args: { name: "retro" } }], api: "responses" },
      { text: "I was not allowed to delete it.", api: "responses" },
    );
    const run = await runKeel(
      ["run", "--config", join(REPO, "examples", "custom-plugin", "agent.config.ts"), "Delete the retro note"],
      { env: offlineEnv({ KEEL_HOME: home, OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: server.openaiBaseURL }) },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("I was not allowed to delete it.");
    const second = server.requests.slice(from)[1]!;
    expect(second.path).toContain("/responses");
    expect(JSON.stringify(second.body.input)).toContain("KEEL_TOOL_DENIED");
    expect(JSON.stringify(second.body.instructions ?? second.body.input)).toContain("House rules");
  });

  it("a fallback chain: an overloaded first model is frozen and the second serves, and the events say so", async () => {
    const dir = mkdtempSync(join(home, "chain-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      'export default { name: "chain", model: ["anthropic:claude-sonnet-4-6", "openai:gpt-4.1"] };\n',
    );
    server.enqueue(
      { error: "overloaded", api: "anthropic" },
      { error: "overloaded", api: "anthropic" },
      { error: "overloaded", api: "anthropic" },
      { text: "Served by the second model.", api: "responses" },
    );
    const run = await runKeel(["run", "--json", "hello"], {
      cwd: dir,
      env: offlineEnv({
        KEEL_HOME: home,
        ANTHROPIC_API_KEY: "sk-test",
        ANTHROPIC_BASE_URL: server.anthropicBaseURL,
        OPENAI_API_KEY: "sk-test",
        OPENAI_BASE_URL: server.openaiBaseURL,
      }),
    });
    expect(run.code, run.stderr).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; kind?: string; message?: string });
    expect(events.some((e) => e.type === "model.notice" && e.kind === "fallback")).toBe(true);
    expect(events.at(-1)!.type).toBe("turn.completed");
  });

  it("a provider error ends the turn with exit 1 and the error class", async () => {
    server.enqueue({ error: "auth", api: "anthropic" });
    const run = await runKeel(["run", "--config", join(REPO, "examples", "minimal", "agent.config.ts"), "hi"], {
      env: offlineEnv({ KEEL_HOME: home, ANTHROPIC_API_KEY: "sk-wrong", ANTHROPIC_BASE_URL: server.anthropicBaseURL }),
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("auth");
  });
});
