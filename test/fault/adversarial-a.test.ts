/**
 * Adversarial fault scenarios for classes 1 (hangs), 6 (crashes a plugin or tool can cause) and
 * 8 (CLI hygiene), tried from outside after the fixes were merged: variants the other fault
 * files do not cover. The real `keel` binary, the official SDKs against the wire server where
 * the fault is on the wire. Each scenario asserts the exit code and a bound on the time, the
 * message (coded, located, no stack trace), what the provider was sent and what is on disk
 * (the turn closed exactly once, every tool call paired).
 */
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { cleanEnv, onlySession, pairing, until, useWirePerScenario } from "./support/hangs.ts";
import { KERNEL, STACK, keel, project } from "./support/adversarial-a.ts";

const { root, wire, online } = useWirePerScenario("keel-fault-adv-a-", { KEEL_EXIT_GRACE_MS: "300" });
const offline = (home: string, extra: Record<string, string> = {}) =>
  cleanEnv({ KEEL_HOME: home, KEEL_EXIT_GRACE_MS: "300", ...extra });
/** A config module importing the kernel's sources; `hostile()` builds a Proxy whose every trap throws. */
const withKernel = (body: string) => `import { defineConfig, definePlugin } from ${JSON.stringify(KERNEL)};
import { EventEmitter } from "node:events";
const hostile = () => new Proxy(function () {}, { get() { throw new Error("trap get"); }, getPrototypeOf() { throw new Error("trap proto"); }, has() { throw new Error("trap has"); }, ownKeys() { throw new Error("trap keys"); }, getOwnPropertyDescriptor() { throw new Error("trap desc"); } });
${body}
`;
const closing = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type === "turn.completed" || e.type === "turn.failed" || e.type === "turn.interrupted");
const assistantTexts = (events: readonly KeelEvent[]) =>
  events.flatMap((e) =>
    e.type === "message.appended" && e.message.role === "assistant"
      ? [e.message.content.map((b) => (b.type === "text" ? b.text : "")).join("")]
      : [],
  );

describe.concurrent("adversarial hangs: the wire", { timeout: 120_000 }, () => {
  it("a 429 saying x-should-retry: true with retry-after: 3600 (what the real API sends) is still not waited for", async () => {
    const server = await wire();
    const p = project(
      root,
      "x-should-retry",
      `export default { name: "xsr", model: "anthropic:claude-sonnet-4-6" };\n`,
    );
    server.enqueue({
      error: "rate_limit",
      retryAfter: "3600",
      headers: { "x-should-retry": "true" },
      api: "anthropic",
    });
    const run = await keel(["run", "hello"], { cwd: p.dir, env: online(server, p.home), capMs: 15_000 });
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/asked to wait 3600 s \(retry-after\).*cap of 30 s \(maxRetryAfterMs\); not waiting/);
    expect(server.requests).toHaveLength(1);
    expect(closing(await onlySession(p.home))).toMatchObject([
      { type: "turn.failed", verdict: { errorClass: "rate_limited" } },
    ]);
  });

  it("a retry-after given as an HTTP date an hour ahead is capped like a number of seconds", async () => {
    const server = await wire();
    const p = project(root, "retry-after-date", `export default { name: "date", model: "openai:gpt-4.1" };\n`);
    server.enqueue({
      error: "rate_limit",
      retryAfter: new Date(Date.now() + 3_600_000).toUTCString(),
      api: "responses",
    });
    const run = await keel(["run", "hello"], { cwd: p.dir, env: online(server, p.home), capMs: 15_000 });
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/asked to wait 3[56]\d\d s \(retry-after\).*not waiting/);
    expect(server.requests).toHaveLength(1);
  });

  it("a fallback chain whose first model stalls mid-text fails over; only the second model's answer is stored", async () => {
    const server = await wire();
    const p = project(
      root,
      "chain-stall-mid-text",
      `export default { name: "chain", model: [{ model: "anthropic:claude-sonnet-4-6", idleTimeoutMs: 300, streamRetries: 0 }, "openai:gpt-4.1"] };\n`,
    );
    server.enqueue(
      { text: "alpha beta gamma delta", chunks: 4, fault: { type: "hang", afterEvents: 5 }, api: "anthropic" },
      { text: "Second model answered.", api: "responses" },
    );
    const run = await keel(["run", "hello"], { cwd: p.dir, env: online(server, p.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stdout).toContain("alpha");
    expect(run.stdout).toContain("Second model answered.");
    expect(run.stderr).toMatch(/stalled \(no event for 300 ms\)/);
    expect(run.stderr).toMatch(
      /failed \(timeout\); frozen for \d+ ms\. Trying openai:gpt-4\.1\. Deltas so far are void\./,
    );
    expect(server.requests.map((r) => `${r.api}:${r.outcome}`)).toEqual([
      "anthropic:client_closed",
      "responses:completed",
    ]);
    const events = await onlySession(p.home);
    expect(assistantTexts(events)).toEqual(["Second model answered."]);
    expect(closing(events).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a Chat Completions stream that sends tokens then stalls is cut by idleTimeoutMs; nothing partial is stored", async () => {
    const server = await wire();
    const p = project(
      root,
      "chat-stall",
      `export default { name: "compat", model: { model: "openai-compatible:local-model", idleTimeoutMs: 300, streamRetries: 0 } };\n`,
    );
    server.enqueue({
      text: "one two three four five six",
      chunks: 6,
      fault: { type: "hang", afterEvents: 3 },
      api: "chat",
    });
    const run = await keel(["run", "hello"], { cwd: p.dir, env: online(server, p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toContain("KEEL_PROVIDER_ERROR");
    expect(run.stderr).toMatch(/stalled \(no event for 300 ms\)/);
    expect(run.stderr).not.toMatch(STACK);
    await server.settled(0);
    expect(server.requests[0]!.outcome).toBe("client_closed");
    const events = await onlySession(p.home);
    expect(assistantTexts(events)).toEqual([]);
    expect(closing(events)).toMatchObject([
      { type: "turn.failed", verdict: { reason: "provider_error", errorClass: "timeout" } },
    ]);
  });

  it("`keel chat`: a stream that stalls, then /exit, leaves within the idle timeout with the turn closed once", async () => {
    const server = await wire();
    const p = project(
      root,
      "chat-exit",
      `export default { name: "chat", model: { model: "anthropic:claude-sonnet-4-6", idleTimeoutMs: 400, streamRetries: 0 } };\n`,
    );
    server.enqueue({
      text: "alpha beta gamma delta",
      chunks: 4,
      fault: { type: "hang", afterEvents: 4 },
      api: "anthropic",
    });
    const run = await keel(["chat"], {
      cwd: p.dir,
      env: online(server, p.home),
      stdin: ["hello", "/exit"],
      endStdin: false,
      capMs: 15_000,
    });
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toContain("keel: failed (provider_error)");
    expect(closing(await onlySession(p.home))).toMatchObject([
      { type: "turn.failed", verdict: { errorClass: "timeout" } },
    ]);
  });
});

describe.concurrent("adversarial hangs: wall time and signals", { timeout: 120_000 }, () => {
  it("limits.wallTimeMs cuts a parallel tool group: the fast call keeps its result, the others are cancelled, every call paired once", async () => {
    const p = project(
      root,
      "wall-parallel",
      withKernel(`export default defineConfig({
  name: "wall-par",
  limits: { wallTimeMs: 3000 },
  tools: [
    { name: "fast", description: "answers at once", execute: async () => "fast done" },
    { name: "stubborn", description: "ignores its signal", execute: () => new Promise((r) => setTimeout(() => r("late"), 60_000)) },
    { name: "polite", description: "honours its signal", execute: (_a, { signal }) => new Promise((r) => { const t = setTimeout(() => r("late"), 60_000); signal.addEventListener("abort", () => { clearTimeout(t); r("aborted politely"); }); }) },
  ],
  offline: { script: [{ toolCalls: [{ id: "a", name: "fast", args: {} }, { id: "b", name: "stubborn", args: {} }, { id: "c", name: "polite", args: {} }] }, { text: "never" }] },
});`),
    );
    const run = await keel(["run", "go"], { cwd: p.dir, env: offline(p.home) });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    // 3 s of wall time (the fast call must finish inside it on a loaded machine) and the exit.
    expect(run.ms).toBeLessThan(12_000);
    expect(run.stderr).toMatch(/still running.*tool stubborn \(call b\)/);
    const events = await onlySession(p.home);
    const paired = pairing(events);
    expect(paired.calls).toEqual(["a", "b", "c"]);
    expect([...paired.results.values()]).toEqual([1, 1, 1]);
    expect(paired.texts.get("a")).toBe("fast done");
    expect(paired.texts.get("b")).toContain("wall-time limit ran out");
    expect(paired.texts.get("c")).toContain("wall-time limit ran out");
    expect(closing(events)).toMatchObject([
      { type: "turn.completed", verdict: { status: "stopped", reason: "wall_time" } },
    ]);
  });

  it("a session.start handler that never settles, with a huge timeoutMs, cannot hold the session: limits.wallTimeMs caps it, the turn runs, the process exits", async () => {
    const p = project(
      root,
      "session-start-stuck",
      withKernel(`const p = definePlugin({ name: "sticky-start", version: "1.0.0", setup(ctx) { ctx.on("session.start", () => new Promise(() => { setInterval(() => {}, 1_000); }), { timeoutMs: 1e9 }); } });
export default defineConfig({ name: "ss", plugins: [p], limits: { wallTimeMs: 2000 }, offline: { script: [{ text: "served anyway" }] } });`),
    );
    const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home), capMs: 20_000 });
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(12_000);
    expect(run.stdout).toContain("served anyway");
    expect(run.stderr).toContain('KEEL_HANDLER_TIMEOUT (plugin "sticky-start", phase "session.start")');
    expect(run.stderr).toMatch(/still running: handler sticky-start:session\.start/);
    const events = await onlySession(p.home);
    expect(events.find((e) => e.type === "diagnostic" && e.code === "KEEL_HANDLER_TIMEOUT")).toMatchObject({
      plugin: "sticky-start",
      phase: "session.start",
    });
    expect(closing(events).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("SIGTERM during a turn cancels it: exit 143, the turn recorded interrupted once, no stack trace", async () => {
    const p = project(
      root,
      "sigterm-run",
      withKernel(`export default defineConfig({ name: "term", offline: { script: [{ hang: true }] } });`),
    );
    let sentAt = 0;
    const run = await keel(["run", "--json", "hello"], {
      cwd: p.dir,
      env: offline(p.home),
      during: (l) =>
        until(() => l.stdout().includes('"prompt.compiled"')).then(
          () => ((sentAt = performance.now()), l.child.kill("SIGTERM")),
        ),
    });
    expect(run.duringError).toBeUndefined();
    expect(sentAt).toBeGreaterThan(0);
    expect(run.signal).toBeNull();
    expect(run.code, run.stderr).toBe(143);
    expect(performance.now() - sentAt).toBeLessThan(5_000);
    expect(run.stderr).toContain("terminated (SIGTERM); cancelling the turn");
    expect(run.stderr).not.toMatch(STACK);
    expect(closing(await onlySession(p.home))).toMatchObject([
      { type: "turn.interrupted", verdict: { reason: "aborted" } },
    ]);
  });

  it("SIGTERM during `keel chat` ends the running turn (interrupted) and the chat: exit 143", async () => {
    const p = project(
      root,
      "sigterm-chat",
      withKernel(`export default defineConfig({ name: "chat-term", offline: { script: [{ hang: true }] } });`),
    );
    const run = await keel(["chat", "--json"], {
      cwd: p.dir,
      env: offline(p.home),
      stdin: ["hello"],
      endStdin: false,
      during: (l) => until(() => l.stdout().includes('"prompt.compiled"')).then(() => l.child.kill("SIGTERM")),
    });
    expect(run.duringError).toBeUndefined();
    expect(run.code, run.stderr).toBe(143);
    expect(run.ms).toBeLessThan(8_000);
    expect(closing(await onlySession(p.home)).map((e) => e.type)).toEqual(["turn.interrupted"]);
  });

  it("SIGTERM or SIGINT while closing (a background handler holds the grace) exits at once; the completed turn stays completed", async () => {
    const body =
      withKernel(`const p = definePlugin({ name: "lingerer", version: "1.0.0", setup(ctx) { ctx.on("turn.post_turn", () => new Promise(() => { setInterval(() => {}, 1_000); }), { await: "background" }); } });
export default defineConfig({ name: "grace", plugins: [p], offline: { script: [{ text: "answered" }] } });`);
    for (const [signal, code] of [
      ["SIGTERM", 143],
      ["SIGINT", 130],
    ] as const) {
      const p = project(root, `close-${signal}`, body);
      let sentAt = 0;
      const run = await keel(["run", "hi"], {
        cwd: p.dir,
        env: offline(p.home, { KEEL_EXIT_GRACE_MS: "30000" }),
        during: (l) =>
          until(() => l.stderr().includes("completed (end_turn)")).then(
            () => ((sentAt = performance.now()), l.child.kill(signal)),
          ),
      });
      expect(run.duringError).toBeUndefined();
      expect(run.code, run.stderr).toBe(code);
      expect(performance.now() - sentAt).toBeLessThan(3_000);
      expect(run.stderr).toMatch(/(terminated|interrupted) while closing; exiting now/);
      expect(run.stdout).toContain("answered");
      expect(closing(await onlySession(p.home)).map((e) => e.type)).toEqual(["turn.completed"]);
    }
  });
});

describe.concurrent("adversarial crashes: hostile values from plugin, tool and provider code", {
  timeout: 120_000,
}, () => {
  it("a handler that throws a Proxy whose every trap throws: a KEEL_HANDLER_THREW diagnostic naming the plugin, the turn completes once", async () => {
    const p = project(
      root,
      "throw-proxy",
      withKernel(`const p = definePlugin({ name: "hostile-thrower", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { throw hostile(); }); } });
export default defineConfig({ name: "h", plugins: [p], offline: { script: [{ text: "still fine" }] } });`),
    );
    const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("still fine");
    expect(run.stderr).toContain('KEEL_HANDLER_THREW (plugin "hostile-thrower", phase "round.pre_request")');
    expect(run.stderr).not.toMatch(STACK);
    const events = await onlySession(p.home);
    expect(events.find((e) => e.type === "diagnostic" && e.code === "KEEL_HANDLER_THREW")).toMatchObject({
      plugin: "hostile-thrower",
    });
    expect(closing(events).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a required handler that throws such a Proxy fails the turn (phase_failed, naming the plugin), closed once, exit 1", async () => {
    const p = project(
      root,
      "throw-proxy-required",
      withKernel(`const p = definePlugin({ name: "strict-hostile", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { throw hostile(); }, { failure: "required" }); } });
export default defineConfig({ name: "h", plugins: [p], offline: { script: [{ text: "never" }] } });`),
    );
    const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('KEEL_PHASE_FAILED (plugin "strict-hostile", phase "round.pre_request")');
    expect(run.stderr).not.toMatch(STACK);
    expect(closing(await onlySession(p.home))).toMatchObject([
      { type: "turn.failed", verdict: { reason: "phase_failed", code: "KEEL_PHASE_FAILED" } },
    ]);
  });

  it("a provider object whose stream throws such a Proxy: a classified provider failure, the turn closed once, exit 1", async () => {
    const p = project(
      root,
      "provider-proxy",
      withKernel(
        `export default defineConfig({ name: "h", model: { id: "custom:hostile", async *stream() { throw hostile(); } } });`,
      ),
    );
    const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("KEEL_PROVIDER_ERROR: custom:hostile");
    expect(run.stderr).not.toMatch(STACK);
    expect(closing(await onlySession(p.home))).toMatchObject([
      { type: "turn.failed", verdict: { reason: "provider_error", errorClass: "unknown" } },
    ]);
  });

  it("tools returning a never-settling thenable, or an object nested 200,000 deep: error results, each call paired, exit 0", async () => {
    const p = project(
      root,
      "odd-tools",
      withKernel(`export default defineConfig({
  name: "odd",
  toolTimeouts: { info: 400 },
  tools: [
    { name: "never", description: "a thenable that never settles", execute: () => ({ then() {} }) },
    { name: "deep", description: "a very deep result", execute: () => { let o = { text: "leaf" }; for (let i = 0; i < 200_000; i++) o = { c: o }; return { content: "x", extra: o }; } },
  ],
  offline: { script: [{ toolCalls: [{ id: "n1", name: "never", args: {} }, { id: "d1", name: "deep", args: {} }] }, { text: "done" }] },
});`),
    );
    const run = await keel(["run", "go"], { cwd: p.dir, env: offline(p.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/✗ never timeout/);
    expect(run.stderr).toMatch(/✗ deep error/);
    expect(run.stderr).not.toMatch(STACK);
    const events = await onlySession(p.home);
    const paired = pairing(events);
    expect(paired.results.get("n1")).toBe(1);
    expect(paired.results.get("d1")).toBe(1);
    expect(paired.texts.get("n1")).toContain("KEEL_TOOL_TIMEOUT");
    expect(paired.texts.get("d1")).toContain("KEEL_OUTPUT_UNREADABLE");
    expect(closing(events).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a plugin throwing from process.nextTick, queueMicrotask or an EventEmitter 'error': KEEL_PROCESS_FAULT naming it, the turn failed once", async () => {
    const throwers = {
      nextTick: `process.nextTick(() => { throw new Error("from nextTick"); })`,
      microtask: `queueMicrotask(() => { throw new Error("from microtask"); })`,
      emitter: `const em = new EventEmitter(); setTimeout(() => em.emit("error", new Error("from emitter")), 20)`,
    };
    await Promise.all(
      Object.entries(throwers).map(async ([name, code]) => {
        const p = project(
          root,
          `fault-${name}`,
          withKernel(`const p = definePlugin({ name: "leaky-${name}", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { ${code}; }); } });
export default defineConfig({ name: "f", plugins: [p], offline: { script: [{ text: "late", delayMs: 400 }] } });`),
        );
        const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home) });
        expect(run.code, run.stderr).toBe(1);
        expect(run.ms).toBeLessThan(8_000);
        expect(run.stderr).toContain(`KEEL_PROCESS_FAULT (plugin "leaky-${name}", phase "round.pre_request")`);
        expect(run.stderr).toContain(`from ${name === "microtask" ? "microtask" : name}`);
        expect(run.stderr).not.toMatch(STACK);
        const events = await onlySession(p.home);
        expect(events.filter((e) => e.type === "fault")).toMatchObject([
          { code: "KEEL_PROCESS_FAULT", plugin: `leaky-${name}` },
        ]);
        expect(closing(events)).toMatchObject([
          { type: "turn.failed", verdict: { reason: "process_fault", plugin: `leaky-${name}` } },
        ]);
      }),
    );
  });

  it("handlers that try to rewrite event.history and post_turn messages change nothing the provider is sent or the log keeps", async () => {
    const server = await wire();
    const p = project(
      root,
      "mutate-history",
      withKernel(`const p = definePlugin({ name: "rewriter", version: "1.0.0", setup(ctx) {
  const tries = (fns) => { for (const f of fns) { try { f(); } catch {} } };
  ctx.on("round.pre_request", (e) => tries([() => e.history.push({ role: "user", content: [{ type: "text", text: "PLANTED" }] }), () => { e.history[0].content[0].text = "PLANTED"; }, () => { e.history.length = 0; }, () => Object.defineProperty(e.history, 0, { value: "PLANTED" })]));
  ctx.on("turn.post_turn", (e) => tries([() => { e.messages[0].content[0].text = "PLANTED"; }, () => e.messages.push({ role: "user", content: [{ type: "text", text: "PLANTED" }] })]));
} });
export default defineConfig({ name: "m", model: "anthropic:claude-sonnet-4-6", plugins: [p] });`),
    );
    server.enqueue({ text: "first answer", api: "anthropic" }, { text: "second answer", api: "anthropic" });
    const first = await keel(["run", "hello there"], { cwd: p.dir, env: online(server, p.home) });
    expect(first.code, first.stderr).toBe(0);
    const id = /session ([0-9a-f-]{36})/.exec(first.stderr)![1]!;
    const second = await keel(["run", "--session", id, "and again"], { cwd: p.dir, env: online(server, p.home) });
    expect(second.code, second.stderr).toBe(0);
    expect(server.requests).toHaveLength(2);
    for (const r of server.requests) expect(JSON.stringify(r.body)).not.toContain("PLANTED");
    expect(server.requests[1]!.body.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "user",
    ]);
    const events = await onlySession(p.home);
    expect(JSON.stringify(events)).not.toContain("PLANTED");
    expect(closing(events).map((e) => e.type)).toEqual(["turn.completed", "turn.completed"]);
  });

  it("a tool that calls process.exit(0) mid-turn: exit 1 with a coded message naming the tool; a resume closes that turn interrupted and answers the call", async () => {
    const p = project(
      root,
      "tool-exit",
      withKernel(
        `export default defineConfig({ name: "quitter", tools: [{ name: "quit", description: "exits the process", execute: () => { process.exit(0); } }], offline: { script: [{ toolCalls: [{ id: "q1", name: "quit", args: {} }] }, { text: "after the resume" }] } });`,
      ),
    );
    const run = await keel(["run", "go"], { cwd: p.dir, env: offline(p.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('KEEL_PROCESS_FAULT (tool "quit"): Code of tool "quit" called process.exit(0)');
    expect(run.stderr).not.toMatch(STACK);
    const id = (await onlySession(p.home))[0]!.sessionId;
    expect(closing(await onlySession(p.home))).toEqual([]);
    // The resumed process's script starts over: its first answer calls quit again, so the resume is a fresh session run with a text-only script.
    const resumed = project(
      root,
      "tool-exit-resume",
      withKernel(
        `export default defineConfig({ name: "quitter", offline: { script: [{ text: "after the resume" }] } });`,
      ),
    );
    const again = await keel(["run", "--session", id, "still there?"], { cwd: resumed.dir, env: offline(p.home) });
    expect(again.code, again.stderr).toBe(0);
    const events = await onlySession(p.home);
    expect(closing(events)).toMatchObject([
      { type: "turn.interrupted", verdict: { reason: "process_exit" } },
      { type: "turn.completed" },
    ]);
    expect(events.find((e) => e.type === "context.repaired")).toMatchObject({ synthesizedResults: ["q1"] });
  });

  it("a plugin setup that throws null, or a Symbol: KEEL_PLUGIN_SETUP_FAILED naming the plugin and its index, exit 2, nothing stored", async () => {
    for (const [name, thrown, says] of [
      ["nully", "null", "setup() threw: null"],
      ["symbolic", 'Symbol("boom")', "setup() threw: Symbol(boom)"],
    ] as const) {
      const p = project(
        root,
        `setup-${name}`,
        withKernel(`const ok = definePlugin({ name: "fine", version: "1.0.0", setup() {} });
const bad = definePlugin({ name: "${name}", version: "1.0.0", setup() { throw ${thrown}; } });
export default defineConfig({ name: "s", plugins: [ok, bad] });`),
      );
      const run = await keel(["run", "hi"], { cwd: p.dir, env: offline(p.home) });
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain(`KEEL_PLUGIN_SETUP_FAILED (plugin "${name}", at plugins[1])`);
      expect(run.stderr).toContain(says);
      expect(run.stderr).not.toMatch(STACK);
      expect(existsSync(p.home)).toBe(false);
    }
  });
});

describe.concurrent("adversarial CLI hygiene", { timeout: 120_000 }, () => {
  it("a config exporting a Proxy whose getOwnPropertyDescriptor or ownKeys trap throws: KEEL_CONFIG_READ_FAILED naming the file, for run, inspect and sessions", async () => {
    const traps = {
      desc: `getOwnPropertyDescriptor() { throw new Error("no descriptor for you"); }`,
      keys: `ownKeys() { throw new Error("no keys for you"); }`,
    };
    for (const [name, trap] of Object.entries(traps)) {
      const p = project(root, `proxy-${name}`, `export default new Proxy({ name: "proxied" }, { ${trap} });\n`);
      for (const args of [["run", "hi"], ["inspect"], ["sessions", "list"]]) {
        const run = await keel(args, { cwd: p.dir, env: offline(p.home) });
        expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(2);
        expect(run.stderr).toContain("KEEL_CONFIG_READ_FAILED");
        expect(run.stderr).toContain(`${p.dir}/agent.config.mjs`);
        expect(run.stderr).toContain(name === "desc" ? "no descriptor for you" : "no keys for you");
        expect(run.stderr).not.toMatch(STACK);
        expect(run.stdout).toBe("");
      }
    }
  });

  it("what plugin and tool code prints (console.log, process.stdout.write) goes to stderr: --json stdout stays exactly the stored events (and the live deltas), a plain run's stdout exactly the answer", async () => {
    const p = project(
      root,
      "chatty-stdout",
      withKernel(`console.log("config says hi");
const p = definePlugin({ name: "chatty", version: "1.0.0", setup(ctx) { console.log("setup says hi"); ctx.on("round.pre_request", () => { console.log("handler says hi"); process.stdout.write("raw write\\n"); }); } });
export default defineConfig({ name: "chatty", plugins: [p], tools: [{ name: "loud", description: "logs", execute: () => { console.info("tool logs"); return "ok"; } }], offline: { script: [{ toolCalls: [{ id: "c1", name: "loud", args: {} }] }, { text: "the answer" }, { toolCalls: [{ id: "c2", name: "loud", args: {} }] }, { text: "the answer" }] } });`),
    );
    const json = await keel(["run", "--json", "hi"], { cwd: p.dir, env: offline(p.home) });
    expect(json.code, json.stderr).toBe(0);
    const lines = json.stdout.trimEnd().split("\n");
    const parsed = lines
      .map((l) => JSON.parse(l) as { type: string; seq?: number })
      .filter((e) => e.seq !== undefined || e.type !== "model.delta");
    const stored = await onlySession(p.home);
    expect(parsed.map((e) => e.type)).toEqual(stored.map((e) => e.type));
    for (const said of ["config says hi", "setup says hi", "handler says hi", "raw write", "tool logs"])
      expect(json.stderr).toContain(said);
    const plain = await keel(["run", "--new", "hi"], { cwd: p.dir, env: offline(p.home) });
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toBe("the answer\n");
    expect(plain.stderr).toContain("handler says hi");
  });

  it("`keel run` with an empty or whitespace-only input is a usage error (exit 2) that opens no session", async () => {
    const p = project(root, "empty-input", `export default { name: "empty" };\n`);
    for (const input of ["", "  \t\n  "]) {
      const run = await keel(["run", input], { cwd: p.dir, env: offline(p.home) });
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain("KEEL_CLI_USAGE");
      expect(run.stderr).toContain("keel run needs the input");
      expect(run.stderr).not.toMatch(STACK);
    }
    expect(existsSync(p.home)).toBe(false);
  });

  it("non-UTF-8 bytes in argv: the input is stored and sent well-formed (U+FFFD); a session id of such bytes is a clean not-found", async () => {
    const server = await wire();
    const p = project(root, "non-utf8", `export default { name: "bytes", model: "anthropic:claude-sonnet-4-6" };\n`);
    server.enqueue({ text: "got it", api: "anthropic" });
    // "hi" + 0xFF 0xFE (never UTF-8) + 0xC3 "(" (a cut sequence) + 0xED 0xA0 0x80 (an encoded lone surrogate)
    const run = await keel(["run"], {
      cwd: p.dir,
      env: online(server, p.home),
      rawArgs: [Buffer.from([0x68, 0x69, 0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80])],
    });
    expect(run.code, run.stderr).toBe(0);
    const sent = JSON.stringify(server.requests[0]!.body.messages);
    expect(sent).toContain("hi\uFFFD");
    expect(sent).not.toMatch(/\p{Cs}/u);
    const events = await onlySession(p.home);
    const input = (events.find((e) => e.type === "turn.started") as { input: string }).input;
    expect(input.startsWith("hi\uFFFD")).toBe(true);
    expect(input).not.toMatch(/\p{Cs}/u);
    const bad = await keel(["run", "--session"], {
      cwd: p.dir,
      env: online(server, p.home),
      rawArgs: [Buffer.from([0xff, 0xfe]), Buffer.from("hi")],
    });
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain("KEEL_SESSION_NOT_FOUND");
    expect(bad.stderr).not.toMatch(STACK);
    expect(server.requests).toHaveLength(1);
  });
});
