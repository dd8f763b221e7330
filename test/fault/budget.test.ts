/**
 * Fault class 19, routing and budgets: the real `keel` binary against the wire server speaking
 * the Anthropic and OpenAI (Responses) wire formats, so two pool members are real SDK-backed
 * providers with different model names. A routed round reaches the member the router chose
 * (the server records which model it got) and the manifest stamps the route; a request over a
 * budget is never sent; session spend survives a restart (a second process refuses); a router
 * that throws or names an unknown member leaves the turn on the default model with a located
 * diagnostic; a routed member that fails falls back and the log says so.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startWireServer } from "../../packages/wire-server/src/index.ts";
import type { RecordedRequest, WireReply, WireServer } from "../../packages/wire-server/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { killAll, project, REPO, runKeel, sessionIdOf, storedEvents, tempRoot, wireEnv } from "./support/storage.ts";

const ROUTER = join(REPO, "packages", "plugin-router", "src", "index.ts");

/** Every request gets a short text answer reporting 20,000 input and 100 output tokens; `tools:1` first calls `pause`. */
function reply(request: RecordedRequest): WireReply {
  const body = JSON.stringify(request.body ?? {});
  const results = (body.match(/tool_result|function_call_output/g) ?? []).length;
  if (/tools:1/.test(body) && results === 0)
    return { toolCalls: [{ name: "pause", args: { ms: 0 } }], usage: { input: 20_000, output: 100 } };
  return { text: `ok from ${request.api}`, usage: { input: 20_000, output: 100 } };
}

let server: WireServer;
const root = tempRoot("keel-budget-");
beforeAll(async () => {
  server = await startWireServer({ onEmpty: reply });
});
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

const pauseTool = `{
    name: "pause",
    description: "Waits ms milliseconds.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "info",
    execute: async () => "paused",
  }`;

function config(extra: string, imports = ""): string {
  return `${imports}
export default {
  name: "route",
  model: "anthropic:claude-sonnet-4-5",
  tools: [${pauseTool}],
  requestOptions: { maxTokens: 100 },
  ${extra}
};
`;
}

const POOL = `models: {
    fast: { model: { model: "openai:gpt-4.1-mini", maxRetries: 0 }, tags: ["cheap", "fast"] },
    strong: { model: "anthropic:claude-sonnet-4-5", tags: ["tools", "images", "strong"] },
  },`;

function env(home: string): NodeJS.ProcessEnv {
  return wireEnv(home, server.anthropicBaseURL, { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: server.openaiBaseURL });
}

function received(from: number): Array<{ api: string; model: unknown }> {
  return server.requests.slice(from).map((r) => ({ api: r.api, model: r.body?.model }));
}

const of = <T extends KeelEvent["type"]>(events: readonly KeelEvent[], type: T) =>
  events.filter((e): e is Extract<KeelEvent, { type: T }> => e.type === type);

describe("fault class 19: routing and budgets", () => {
  it("routes each round across two SDK-backed pool members; the server sees the chosen model; the manifest stamps the route", async () => {
    const p = project(
      root,
      "route",
      config(`${POOL} plugins: [router()],`, `import { router } from ${JSON.stringify(ROUTER)};`),
    );
    const n = server.requests.length;
    const chat = await runKeel(["run", "--mode", "chat", "hello there"], { cwd: p.dir, env: env(p.home) });
    expect(chat.code, chat.stderr).toBe(0);
    expect(received(n)).toEqual([{ api: "responses", model: "gpt-4.1-mini" }]);
    const n2 = server.requests.length;
    const id = sessionIdOf(chat.stderr);
    const agent = await runKeel(["run", "--session", id, "--mode", "agent", "tools:1 go"], {
      cwd: p.dir,
      env: env(p.home),
    });
    expect(agent.code, agent.stderr).toBe(0);
    expect(received(n2)).toEqual([
      { api: "anthropic", model: "claude-sonnet-4-5" },
      { api: "anthropic", model: "claude-sonnet-4-5" },
    ]);
    const events = storedEvents(p.home, id);
    const routes = of(events, "prompt.compiled").map((e) => e.manifest.route);
    expect(routes.map((r) => r?.model)).toEqual(["fast", "strong", "strong"]);
    expect(routes[0]).toMatchObject({ provider: "openai:gpt-4.1-mini", plugin: "@keel/plugin-router" });
    expect(routes[0]!.reason).toMatch(/^cheapest that fits: fast/);
    expect(routes[1]!.reason).toMatch(/^cheapest that fits: strong .*needs tools$/);
    expect(routes[2]!.reason).toBe("kept strong for this turn (prompt cache stays warm)");
    expect(of(events, "model.responded").map((e) => e.provider)).toEqual([
      "openai:gpt-4.1-mini",
      "anthropic:claude-sonnet-4-5",
      "anthropic:claude-sonnet-4-5",
    ]);
    // The replay asks no model (no key, no server) and routes each request as the run did.
    const asked = server.requests.length;
    const offline = { ...wireEnv(p.home, "http://127.0.0.1:9"), ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" };
    const replay = await runKeel(["replay", id, "--strict", "--json"], { cwd: p.dir, env: offline, timeoutMs: 60_000 });
    expect(replay.code, replay.stderr).toBe(0);
    const report = JSON.parse(replay.stdout) as {
      identical: boolean;
      requests: Array<{ same: boolean; route?: { recorded?: string; replayed?: string } }>;
    };
    expect(report.identical).toBe(true);
    expect(report.requests.map((q) => q.route)).toEqual([
      { recorded: "fast", replayed: "fast" },
      { recorded: "strong", replayed: "strong" },
      { recorded: "strong", replayed: "strong" },
    ]);
    expect(server.requests.length).toBe(asked);
  });

  it("a request over limits.maxCostUsd is never sent: the wire server sees nothing and keel says what was spent and the limit", async () => {
    const p = project(root, "over", config("limits: { maxCostUsd: 0.0001 },"));
    const n = server.requests.length;
    const r = await runKeel(["run", "hello"], { cwd: p.dir, env: env(p.home) });
    expect(r.code).toBe(1);
    expect(server.requests.length).toBe(n);
    expect(r.stderr).toContain("stopped (budget)");
    expect(r.stderr).toMatch(
      /KEEL_BUDGET_EXCEEDED: This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.0001; the next request to anthropic:claude-sonnet-4-5 is estimated at \$0\.00\d\d/,
    );
    expect(r.stderr).toContain("Raise the limit");
    const events = storedEvents(p.home, sessionIdOf(r.stderr));
    expect(of(events, "guard.tripped")[0]).toMatchObject({ guard: "budget", limit: 0.0001 });
    expect(of(events, "prompt.compiled")).toHaveLength(0);
  });

  it("session spend survives a restart: the second process reads it from the log and refuses", async () => {
    // 20,000 × $3/M + 100 × $15/M = $0.0615 per request; the limit leaves room for exactly one.
    const p = project(root, "session", config("limits: { maxSessionCostUsd: 0.062 },"));
    const n = server.requests.length;
    const first = await runKeel(["run", "hello"], { cwd: p.dir, env: env(p.home) });
    expect(first.code, first.stderr).toBe(0);
    expect(server.requests.length).toBe(n + 1);
    const id = sessionIdOf(first.stderr);
    const second = await runKeel(["run", "--session", id, "again"], { cwd: p.dir, env: env(p.home) });
    expect(second.code).toBe(1);
    expect(server.requests.length).toBe(n + 1);
    expect(second.stderr).toContain("This session spent $0.0615 of limits.maxSessionCostUsd $0.0620");
  });

  it("a router that names an unknown member, or throws, leaves the turn on the default model with a located diagnostic", async () => {
    const unknown = `{ name: "bad-router", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => [{ kind: "request_options", options: { route: { model: "nope", reason: "why not" } } }]); } }`;
    const throwing = `{ name: "throwing-router", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { throw new Error("router broke"); }); } }`;
    for (const [name, plugin, code] of [
      ["bad-router", unknown, "KEEL_ROUTE_UNKNOWN"],
      ["throwing-router", throwing, "KEEL_HANDLER_THREW"],
    ] as const) {
      const p = project(root, name, config(`${POOL} plugins: [${plugin}],`));
      const n = server.requests.length;
      const r = await runKeel(["run", "--mode", "chat", "hello"], { cwd: p.dir, env: env(p.home) });
      expect(r.code, r.stderr).toBe(0);
      expect(received(n)).toEqual([{ api: "anthropic", model: "claude-sonnet-4-5" }]);
      const events = storedEvents(p.home, sessionIdOf(r.stderr));
      const d = of(events, "diagnostic").find((e) => e.code === code);
      expect(d, name).toMatchObject({ plugin: name, phase: "round.pre_request" });
      expect(of(events, "prompt.compiled")[0]!.manifest.route).toBeUndefined();
    }
  });

  it("a routed member that fails falls back to the default model, and the log says so", async () => {
    const p = project(
      root,
      "fallback",
      config(`${POOL} plugins: [router()],`, `import { router } from ${JSON.stringify(ROUTER)};`),
    );
    const n = server.requests.length;
    server.enqueue({ error: "rate_limit", api: "responses" });
    const r = await runKeel(["run", "--mode", "chat", "hello"], { cwd: p.dir, env: env(p.home) });
    expect(r.code, r.stderr).toBe(0);
    expect(received(n)).toEqual([
      { api: "responses", model: "gpt-4.1-mini" },
      { api: "anthropic", model: "claude-sonnet-4-5" },
    ]);
    const events = storedEvents(p.home, sessionIdOf(r.stderr));
    expect(of(events, "prompt.compiled")[0]!.manifest.route?.model).toBe("fast");
    const notice = of(events, "model.notice").find((e) => e.kind === "fallback")!;
    expect(notice.message).toMatch(/openai:gpt-4\.1-mini failed \(rate_limited\).*Trying anthropic:claude-sonnet-4-5/);
    expect(of(events, "model.responded")[0]!.provider).toBe("anthropic:claude-sonnet-4-5");
  });

  it("a goal run that reaches its budget pauses with reason budget, in keel goal's output and keel goal status", async () => {
    const p = project(root, "goal", config(""));
    const n = server.requests.length;
    // One turn costs $0.0615; the $0.0005 left after it is below any request's estimate.
    const r = await runKeel(["goal", "keep working", "--turns", "5", "--every", "99", "--budget", "0.062"], {
      cwd: p.dir,
      env: env(p.home),
      timeoutMs: 60_000,
    });
    expect(r.code, r.stderr).toBe(1);
    expect(server.requests.length).toBe(n + 1);
    expect(r.stderr).toContain("budget $0.062");
    expect(r.stderr).toMatch(
      /keel: goal paused \(budget: turn 2 stopped before a request that would pass a spending limit \(the run spent \$0\.0615 of its \$0\.0620 budget\): KEEL_BUDGET_EXCEEDED/,
    );
    const status = await runKeel(["goal", "status"], { cwd: p.dir, env: env(p.home) });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/paused\s+2\/5 turns/);
    expect(status.stdout).toContain("budget: turn 2 stopped");
    const bad = await runKeel(["goal", "x", "--budget", "free"], { cwd: p.dir, env: env(p.home) });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--budget takes the run\'s budget in dollars (a number > 0), not "free"');
  });
});
