/**
 * Through the real `keel` binary: an agent.config.ts in a temp folder (its node_modules links
 * @keel/ai-sdk and @ai-sdk/openai, as an install would) names `aiSdkModel(createOpenAI({ baseURL:
 * <wire> })("gpt-4o"))`, alone and first in a fallback chain with a native model string; `keel run`
 * calls a tool and answers offline against the wire server, the log records usage, cost and ids.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "../../cli/test/support/run-keel.ts";
import { storedEvents, storedSessions } from "../../../test/fault/support/storage.ts";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
let server: WireServer;
let root: string;
beforeAll(async () => {
  server = await startWireServer();
  root = mkdtempSync(join(tmpdir(), "keel-ai-sdk-cli-"));
});
afterAll(async () => {
  await server.close();
  rmSync(root, { recursive: true, force: true });
});

/** A project folder whose agent.config.ts has `model` (an expression) and a `get_weather` tool. */
function project(name: string, model: string): { dir: string; home: string } {
  const dir = join(root, name);
  const modules = join(dir, "node_modules");
  mkdirSync(join(modules, "@keel"), { recursive: true });
  mkdirSync(join(modules, "@ai-sdk"), { recursive: true });
  symlinkSync(PKG, join(modules, "@keel", "ai-sdk"));
  for (const pkg of ["kernel", "providers"]) symlinkSync(join(PKG, "..", pkg), join(modules, "@keel", pkg));
  symlinkSync(join(PKG, "node_modules", "@ai-sdk", "openai"), join(modules, "@ai-sdk", "openai"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  writeFileSync(
    join(dir, "agent.config.ts"),
    `import { aiSdkModel } from "@keel/ai-sdk";
import { createOpenAI } from "@ai-sdk/openai";

const openai = createOpenAI({ apiKey: "sk-test", baseURL: process.env.WIRE_OPENAI_URL });

export default {
  name: "ai-sdk-agent",
  model: ${model},
  tools: [{
    name: "get_weather",
    description: "Weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    category: "info",
    execute: ({ city }: { city: string }) => city + ": 21°C and sunny",
  }],
};
`,
  );
  return { dir, home: join(dir, "home") };
}

function env(home: string): NodeJS.ProcessEnv {
  return offlineEnv({
    KEEL_HOME: home,
    WIRE_OPENAI_URL: server.openaiBaseURL,
    ANTHROPIC_API_KEY: "sk-test",
    ANTHROPIC_BASE_URL: server.anthropicBaseURL,
  });
}

describe("keel run with an AI SDK model in agent.config.ts", () => {
  it("calls the tool and answers through @ai-sdk/openai; usage, cost and the model id are logged", async () => {
    const { dir, home } = project("alone", `aiSdkModel(openai("gpt-4o"), { price: { input: 2.5, output: 10 } })`);
    const from = server.requests.length;
    server.enqueue(
      {
        toolCalls: [{ name: "get_weather", args: { city: "Paris" } }],
        usage: { input: 40, output: 6 },
        api: "responses",
      },
      { text: "Paris: sunny, 21°C.", usage: { input: 60, output: 7 }, api: "responses" },
    );
    const run = await runKeel(["run", "Weather in Paris?"], { cwd: dir, env: env(home) });
    expect(run.stderr).toContain("keel: model openai.responses:gpt-4o");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("Paris: sunny, 21°C.");
    const seen = server.requests.slice(from);
    expect(seen.map((r) => [r.api, r.outcome])).toEqual([
      ["responses", "completed"],
      ["responses", "completed"],
    ]);
    expect(JSON.stringify(seen[1]!.body)).toContain("21°C and sunny");
    const [session] = storedSessions(home);
    const events = storedEvents(home, session!);
    const responded = events.filter((e) => e.type === "model.responded");
    expect(responded.map((e) => e.type === "model.responded" && e.provider)).toEqual([
      "openai.responses:gpt-4o",
      "openai.responses:gpt-4o",
    ]);
    const usage = responded.map((e) => (e.type === "model.responded" ? e.usage : {}));
    expect(usage.map((u) => u.inputTokens)).toEqual([40, 60]);
    expect(usage[0]!.costUsd).toBeCloseTo((40 * 2.5 + 6 * 10) / 1e6, 9);
    expect(events.some((e) => e.type === "tool.completed" && e.status === "ok")).toBe(true);
  });

  it("first in a fallback chain: a 429 beyond maxRetryAfterMs freezes it and the native model answers", async () => {
    const { dir, home } = project(
      "chain",
      `[aiSdkModel(openai("gpt-4o"), { maxRetryAfterMs: 1000 }), "anthropic:claude-sonnet-4-6"]`,
    );
    server.enqueue(
      { error: "rate_limit", retryAfter: "3600", api: "responses" },
      { toolCalls: [{ name: "get_weather", args: { city: "Oslo" } }], api: "anthropic" },
      { text: "Oslo: sunny.", api: "anthropic" },
    );
    const run = await runKeel(["run", "Weather in Oslo?"], { cwd: dir, env: env(home) });
    expect(run.stderr).toContain("keel: model fallback:openai.responses:gpt-4o|anthropic:claude-sonnet-4-6");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("Oslo: sunny.");
    const events = storedEvents(home, storedSessions(home)[0]!);
    const notices = events.filter((e) => e.type === "model.notice");
    // Capped retry-after (not waited for), frozen, then skipped in the round after the tool call.
    expect(
      notices.map((n) => n.type === "model.notice" && [n.kind, n.provider, n.data?.action ?? n.data?.reason]),
    ).toEqual([
      ["info", "openai.responses:gpt-4o", "retry_after_capped"],
      ["fallback", "openai.responses:gpt-4o", "freeze"],
      ["fallback", "openai.responses:gpt-4o", "skip"],
    ]);
    const responded = events.filter((e) => e.type === "model.responded");
    // Frozen for the retry-after: the second round goes straight to the native model.
    expect(responded.map((e) => e.type === "model.responded" && e.provider)).toEqual([
      "anthropic:claude-sonnet-4-6",
      "anthropic:claude-sonnet-4-6",
    ]);
  });
});
