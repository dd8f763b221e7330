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
import { inProcessAgent } from "./support/storage.ts";
import { definePlugin, messageText } from "../../packages/kernel/src/index.ts";

const ROUTER = join(REPO, "packages", "plugin-router", "src", "index.ts");
const TASKS = join(REPO, "packages", "plugin-tasks", "src", "index.ts");

/** What the wire server served since request `from`, in dollars at claude-sonnet-4-5's $3/$15 per million. */
function served(from: number): number {
  return server.requests.slice(from).reduce((sum, r) => {
    const u = reply(r).usage!;
    return sum + (u.input! * 3 + u.output! * 15) / 1_000_000;
  }, 0);
}

/**
 * Every request gets a short text answer reporting 20,000 input and 100 output tokens; `tools:1`
 * first calls `pause`. `tasks:4` makes the parent call `task` four times at once (1,000 input
 * tokens a request); a child's request reports its real size (its instructions are N words).
 */
function reply(request: RecordedRequest): WireReply {
  const body = JSON.stringify(request.body ?? {});
  const results = (body.match(/tool_result|function_call_output/g) ?? []).length;
  const words = (body.match(/ word/g) ?? []).length;
  // No cache figures of the server's own prompt-cache model: what is served is what is scripted.
  const nocache = { cacheRead: 0, cacheWrite: 0 };
  if (words > 1000) return { text: "part done", usage: { input: words, output: 100, ...nocache } };
  if (/tasks:4/.test(body))
    return results === 0
      ? {
          toolCalls: [1, 2, 3, 4].map((k) => ({
            id: `toolu_task_${k}`,
            name: "task",
            args: { profile: "worker", prompt: `do part ${k}` },
          })),
          usage: { input: 1_000, output: 100, ...nocache },
        }
      : { text: "all parts handled", usage: { input: 1_000, output: 100, ...nocache } };
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

  describe("parallel subagents share the parent's dollar limit (issue 43, item 4)", () => {
    // Each child's request is 50,000 words of instructions: $0.1515 served (and estimated) a request.
    // Unreserved, four children each got the parent's whole remainder: $0.6105 was served with the parent.
    const WORDS = "word ".repeat(50_000);
    const cap = `{ name: "cap", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => [{ kind: "request_options", options: { maxTokens: 100 } }]); } }`;
    const tasksConfig = (limits: string) =>
      config(
        `limits: { maxCostUsd: 0.5 },
  plugins: [tasks({ profiles: { worker: { description: "Does one part.", instructions: ${JSON.stringify(WORDS)}, plugins: [${cap}]${limits} } } })],`,
        `import { tasks } from ${JSON.stringify(TASKS)};`,
      );

    async function runTasks(name: string, limits: string) {
      const p = project(root, name, tasksConfig(limits));
      const n = server.requests.length;
      const r = await runKeel(["run", "tasks:4 split the work"], { cwd: p.dir, env: env(p.home), timeoutMs: 120_000 });
      expect(r.code, r.stderr).toBe(0);
      const id = sessionIdOf(r.stderr);
      const results = of(storedEvents(p.home, id), "message.appended")
        .filter((e) => e.message.role === "tool")
        .map((e) => messageText(e.message));
      return { n, results, childRequests: server.requests.slice(n).filter((q) => reply(q).text === "part done") };
    }

    it("tasks that ask for $0.17 each: three are served, the fourth is refused (budget) and never starts; the sum stays within $0.50", async () => {
      const { n, results, childRequests } = await runTasks("tasks-ask", ", limits: { maxCostUsd: 0.17 }");
      expect(results).toHaveLength(4);
      const refused = results.filter((t) => t.includes("refused (budget)"));
      expect(refused, results.join("\n")).toHaveLength(1);
      expect(refused[0]).toContain(
        "KEEL_CHILD_BUDGET (at limits.maxCostUsd): The parent turn has no maxCostUsd left for another child session ($0.0000; its 3 running child session(s) hold $0.4955 until they end).",
      );
      expect(results.filter((t) => t.includes("part done"))).toHaveLength(3);
      expect(childRequests).toHaveLength(3);
      // Two parent requests at $0.0045 and three children at about $0.1515: $0.4635 (unreserved, before the ledger, $0.6105).
      expect(served(n)).toBeCloseTo(0.4635, 4);
    });

    it("tasks that ask nothing get an even share of what is left: none can afford its request, so nothing of theirs is served and each says budget", async () => {
      const { n, results, childRequests } = await runTasks("tasks-share", "");
      expect(results).toHaveLength(4);
      for (const t of results)
        expect(t).toMatch(
          /stopped by budget \(KEEL_BUDGET_EXCEEDED: This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.1239/,
        );
      expect(childRequests).toHaveLength(0);
      expect(served(n)).toBeLessThanOrEqual(0.5);
    });
  });

  it("a turn's usage after an approval counts the rounds before the pause too (real SQLite file, a restart between pause and approve)", async () => {
    const p = project(root, "approve-usage", config(""));
    const ask = definePlugin({
      name: "asker",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "review" })),
    });
    const first = await inProcessAgent(p.home, server.anthropicBaseURL, [ask]);
    let id: string;
    try {
      const s = await first.session();
      id = s.id;
      const paused = await s.run("tools:1 go");
      expect(paused.verdict.status).toBe("paused");
      expect(paused.usage).toMatchObject({ inputTokens: 20_000, outputTokens: 100 });
    } finally {
      await first.close();
    }
    const second = await inProcessAgent(p.home, server.anthropicBaseURL, [ask]);
    try {
      const s = await second.session(id);
      await s.approve(s.pendingApprovals()[0]!.callId);
      const r = await s.resume();
      expect(r.verdict.status).toBe("completed");
      // Two requests of 20,000 + 100 tokens at $3/$15 per million: the whole turn, not the resumed part.
      expect(r.usage).toMatchObject({ inputTokens: 40_000, outputTokens: 200 });
      expect(r.usage.costUsd).toBeCloseTo(0.123, 6);
      const ended = of(storedEvents(p.home, id), "turn.completed").at(-1)!;
      expect(ended.usage).toMatchObject({ inputTokens: 40_000, outputTokens: 200 });
    } finally {
      await second.close();
    }
  });
});
