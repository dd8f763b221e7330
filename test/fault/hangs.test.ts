/**
 * Fault suite, class 1 — hangs: nothing may hang a Keel process. The real `keel` binary, the
 * official SDKs, and the wire server with its faults (hang before headers, a stream that stops
 * after its headers, 429s with long retry-after); plugins and tools that never settle or ignore
 * their signals. Every scenario asserts the exit code, a bound on the time, what the provider was
 * sent and what is on disk. Timeouts are short through the config (object-form models,
 * `limits.wallTimeMs`, `setupTimeoutMs`) and KEEL_EXIT_GRACE_MS. The tokenizer's cache file
 * replaced by a FIFO or a device must not hang a run either, nor may anything Keel creates or
 * enables at start on a path from the environment or the config (the compile cache, the home,
 * an offline script, a skill file, `keel init`'s folder) wait on a path it has not checked.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import {
  cleanEnv,
  onlySession,
  pairing,
  REPO,
  scenario,
  timedKeel,
  until,
  useWirePerScenario,
} from "./support/hangs.ts";

const { root, wire, online } = useWirePerScenario("keel-fault-hangs-");
const terminal = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type.startsWith("turn.") && e.type !== "turn.started");

// Scenarios in a concurrent block queue for the two CLI slots (support/hangs.ts), so their
// timeouts are hang bounds for the block, not speed bounds; each asserts its own bound on time.
describe.concurrent("hangs: provider streams", { timeout: 120_000 }, () => {
  it("a stream that stops after its headers is cut by the model's idleTimeoutMs: exit 1 with a classified timeout, fast", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "stall",
      `export default { name: "stall", model: { model: "anthropic:claude-sonnet-4-6", idleTimeoutMs: 300, streamRetries: 0 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue({
      text: "This answer never finishes.",
      chunks: 4,
      fault: { type: "hang", afterEvents: 3 },
      api: "anthropic",
    });
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/stalled \(no event for 300 ms\)/);
    expect(run.stderr).toContain("timeout");
    expect(server.requests.slice(from)).toHaveLength(1);
    await server.settled(from);
    expect(server.requests[from]!.outcome).toBe("client_closed");
    const events = await onlySession(s.home);
    const end = terminal(events);
    expect(end.map((e) => e.type)).toEqual(["turn.failed"]);
    expect((end[0] as any).verdict).toMatchObject({
      status: "failed",
      reason: "provider_error",
      errorClass: "timeout",
    });
    expect(events.some((e) => e.type === "model.notice" && e.message.includes("stalled"))).toBe(true);
  });

  it("a stalled stream is retried after the idle cut (streamRetries) and the retry serves the turn", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "stall-retry",
      `export default { name: "stall-retry", model: { model: "openai:gpt-4.1", idleTimeoutMs: 300, streamRetries: 1 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue(
      { text: "half", fault: { type: "hang", afterEvents: 2 }, api: "responses" },
      { text: "Second attempt served.", api: "responses" },
    );
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stdout).toContain("Second attempt served.");
    expect(run.stderr).not.toContain("exiting while work is still running");
    expect(run.stderr).toMatch(/retrying/);
    expect(server.requests.slice(from).map((r) => r.api)).toEqual(["responses", "responses"]);
    expect(terminal(await onlySession(s.home)).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a server that never sends headers is cut by firstByteTimeoutMs: exit 1 with a timeout, nothing retried for minutes", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "first-byte",
      `export default { name: "first-byte", model: { model: "openai:gpt-4.1", firstByteTimeoutMs: 1500 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue({ hang: "before_headers", api: "responses" });
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stderr).toMatch(/no response within 1500 ms \(first-byte timeout\)/);
    expect(server.requests.slice(from)).toHaveLength(1);
    const end = terminal(await onlySession(s.home));
    expect((end[0] as any).verdict).toMatchObject({ status: "failed", errorClass: "timeout" });
  });

  it("a first-byte timeout on the first model of a chain fails over to the next one, with notices", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "first-byte-chain",
      `export default { name: "chain", model: [{ model: "anthropic:claude-sonnet-4-6", firstByteTimeoutMs: 1500 }, "openai:gpt-4.1"] };\n`,
    );
    const from = server.requests.length;
    server.enqueue(
      { hang: "before_headers", api: "anthropic" },
      { text: "Served by the second model.", api: "responses" },
    );
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(10_000);
    expect(run.stdout).toContain("Served by the second model.");
    expect(run.stderr).toMatch(/first-byte timeout/);
    expect(run.stderr).toMatch(/failed \(timeout\); frozen for \d+ ms\. Trying openai:gpt-4\.1/);
    expect(server.requests.slice(from).map((r) => r.api)).toEqual(["anthropic", "responses"]);
    const events = await onlySession(s.home);
    expect(events.filter((e) => e.type === "model.notice").map((e: any) => e.kind)).toEqual(
      expect.arrayContaining(["info", "fallback"]),
    );
    expect(terminal(events).map((e) => e.type)).toEqual(["turn.completed"]);
  });
});

describe.concurrent("hangs: retry-after", { timeout: 120_000 }, () => {
  it("a 429 with retry-after: 3600 is not waited for: exit 1 at once, one request, a notice on stderr naming the cap", async () => {
    const server = await wire();
    const s = scenario(root, "retry-after", `export default { name: "ra", model: "anthropic:claude-sonnet-4-6" };\n`);
    const from = server.requests.length;
    server.enqueue({ error: "rate_limit", retryAfter: "3600", api: "anthropic" });
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/asked to wait 3600 s \(retry-after\).*cap of 30 s \(maxRetryAfterMs\); not waiting/);
    expect(run.stderr).toContain("rate_limited");
    expect(server.requests.slice(from)).toHaveLength(1);
    const end = terminal(await onlySession(s.home));
    expect((end[0] as any).verdict).toMatchObject({ status: "failed", errorClass: "rate_limited" });
  });

  it("a 429 with retry-after: 3600 on the first model of a chain fails over to the second at once", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "retry-after-chain",
      `export default { name: "ra-chain", model: ["openai:gpt-4.1", "anthropic:claude-sonnet-4-6"] };\n`,
    );
    const from = server.requests.length;
    server.enqueue(
      { error: "rate_limit", retryAfter: "3600", api: "responses" },
      { text: "Second model here.", api: "anthropic" },
    );
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stdout).toContain("Second model here.");
    expect(run.stderr).toMatch(/not waiting/);
    expect(run.stderr).toMatch(/openai:gpt-4\.1 failed \(rate_limited\); frozen for 600000 ms/);
    expect(server.requests.slice(from).map((r) => r.api)).toEqual(["responses", "anthropic"]);
  });

  it("a retry-after within the cap is still honoured by the SDK (the cap is a cap, not a refusal)", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "retry-after-short",
      `export default { name: "ra-short", model: { model: "anthropic:claude-sonnet-4-6", maxRetryAfterMs: 2000 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue(
      { error: "rate_limit", retryAfter: "0.2", api: "anthropic" },
      { text: "After a short wait.", api: "anthropic" },
    );
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("After a short wait.");
    expect(run.stderr).not.toMatch(/not waiting/);
    expect(server.requests.slice(from)).toHaveLength(2);
  });

  it("maxRetryAfterMs from an object-form model applies: retry-after 5 s over a 1 s cap fails at once", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "retry-after-cap",
      `export default { name: "ra-cap", model: { model: "openai:gpt-4.1", maxRetryAfterMs: 1000 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue({ error: "overloaded", retryAfter: "5", api: "responses" });
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/asked to wait 5 s \(retry-after\).*cap of 1 s/);
    expect(server.requests.slice(from)).toHaveLength(1);
  });
});

describe.concurrent("hangs: wall time", { timeout: 120_000 }, () => {
  it("limits.wallTimeMs cuts a running provider stream: exit 1 within the bound, verdict stopped wall_time, guard recorded", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "wall-stream",
      `export default { name: "wall", model: { model: "anthropic:claude-sonnet-4-6", idleTimeoutMs: 0, firstByteTimeoutMs: 0 }, limits: { wallTimeMs: 1_500 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue({ text: "Thinking very hard", fault: { type: "hang", afterEvents: 2 }, api: "anthropic" });
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: online(server, s.home) });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    expect(run.ms).toBeLessThan(8_000);
    expect(run.stderr).toContain("guard wall_time tripped");
    expect(server.requests.slice(from)).toHaveLength(1);
    await server.settled(from);
    expect(server.requests[from]!.outcome).toBe("client_closed");
    const events = await onlySession(s.home);
    const end = terminal(events);
    expect(end.map((e) => e.type)).toEqual(["turn.completed"]);
    expect((end[0] as any).verdict).toEqual({ status: "stopped", reason: "wall_time" });
    expect(events.filter((e) => e.type === "guard.tripped").map((e: any) => e.guard)).toEqual(["wall_time"]);
  });

  it("limits.wallTimeMs cuts a tool that ignores its signal: its call still gets exactly one result, and the process exits", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "wall-tool",
      `export default {
  name: "wall-tool",
  model: "anthropic:claude-sonnet-4-6",
  limits: { wallTimeMs: 4000 },
  tools: [{ name: "stubborn", description: "Ignores its signal.", execute: () => new Promise((r) => setTimeout(() => r("too late"), 60_000)) }],
};\n`,
    );
    const from = server.requests.length;
    server.enqueue({ toolCalls: [{ id: "call_stubborn", name: "stubborn", args: {} }], api: "anthropic" });
    // The limit must outlast the model call on a loaded machine (it is the tool it has to cut), so 4 s, not 0.8.
    const run = await timedKeel(["run", "go"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "200" }),
    });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(1);
    // 4 s of wall time, the 200 ms grace and start-up: far below the 60 s the tool would take.
    expect(run.ms).toBeLessThan(14_000);
    expect(run.stderr).toMatch(/still running.*tool stubborn \(call call_stubborn\)/);
    expect(server.requests.slice(from)).toHaveLength(1);
    const events = await onlySession(s.home);
    const p = pairing(events);
    expect(p.calls).toEqual(["call_stubborn"]);
    expect(p.results.get("call_stubborn")).toBe(1);
    expect(p.texts.get("call_stubborn")).toContain("wall-time limit ran out");
    expect((terminal(events)[0] as any).verdict).toEqual({ status: "stopped", reason: "wall_time" });
  });
});

const stuckPlugin = (marker: string, timer: boolean) => `{
  name: "stuck-setup",
  version: "1.0.0",
  setup() {
    writeFileSync(${JSON.stringify(marker)}, "setup ran");
    ${timer ? "setInterval(() => {}, 1_000);" : ""}
    return new Promise(() => {});
  },
}`;

describe.concurrent("hangs: plugin setup", { timeout: 120_000 }, () => {
  for (const command of [["run", "hello"], ["inspect"]]) {
    it(`a setup that never settles fails \`keel ${command[0]}\` with KEEL_PLUGIN_SETUP_TIMEOUT naming the plugin, within the deadline`, async () => {
      const server = await wire();
      const s = scenario(root, `setup-${command[0]}`, "");
      const marker = join(s.dir, "marker");
      scenario(
        root,
        `setup-${command[0]}`,
        `import { writeFileSync } from "node:fs";\nexport default { name: "stuck", model: "anthropic:claude-sonnet-4-6", setupTimeoutMs: 500, plugins: [${stuckPlugin(marker, true)}] };\n`,
      );
      const from = server.requests.length;
      const run = await timedKeel(command, { cwd: s.dir, env: online(server, s.home) });
      expect(run.killed).toBe(false);
      expect(run.code, run.stderr).toBe(2);
      expect(run.ms).toBeLessThan(6_000);
      expect(run.stderr).toContain("KEEL_PLUGIN_SETUP_TIMEOUT");
      expect(run.stderr).toContain("stuck-setup");
      expect(run.stderr).toMatch(/within 500 ms/);
      expect(existsSync(marker)).toBe(true);
      expect(server.requests.slice(from)).toHaveLength(0);
    });
  }

  it("a setup that never settles and holds no timer is a located error too, not exit 13", async () => {
    const s = scenario(root, "setup-no-timer", "");
    const marker = join(s.dir, "marker");
    scenario(
      root,
      "setup-no-timer",
      `import { writeFileSync } from "node:fs";\nexport default { name: "stuck", setupTimeoutMs: 300, plugins: [${stuckPlugin(marker, false)}] };\n`,
    );
    const run = await timedKeel(["run", "hello"], { cwd: s.dir, env: cleanEnv({ KEEL_HOME: s.home }) });
    expect(run.code, run.stderr).toBe(2);
    expect(run.ms).toBeLessThan(6_000);
    expect(run.stderr).toMatch(/KEEL_PLUGIN_SETUP_TIMEOUT.*stuck-setup|stuck-setup.*KEEL_PLUGIN_SETUP_TIMEOUT/s);
  });

  it("`keel sessions list` sets no plugin up: a hanging setup does not stop it listing the sessions", async () => {
    const server = await wire();
    const a = scenario(
      root,
      "sessions-a",
      `export default { name: "lister", model: "anthropic:claude-sonnet-4-6" };\n`,
    );
    server.enqueue({ text: "First session.", api: "anthropic" });
    const first = await timedKeel(["run", "hello"], { cwd: a.dir, env: online(server, a.home) });
    expect(first.code, first.stderr).toBe(0);
    const b = scenario(root, "sessions-b", "");
    const marker = join(b.dir, "marker");
    scenario(
      root,
      "sessions-b",
      `import { writeFileSync } from "node:fs";\nexport default { name: "lister", home: ${JSON.stringify(a.home)}, plugins: [${stuckPlugin(marker, true)}] };\n`,
    );
    const run = await timedKeel(["sessions", "list", "--json"], { cwd: b.dir, env: cleanEnv() });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(5_000);
    const list = JSON.parse(run.stdout) as Array<{ agent: string }>;
    expect(list).toHaveLength(1);
    expect(list[0]!.agent).toBe("lister");
    expect(existsSync(marker)).toBe(false);
  });
});

describe.concurrent("hangs: exit after the turn", { timeout: 120_000 }, () => {
  it("a background handler that ignores its signal does not keep `keel run` alive: exit 0 after the grace, naming it", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "background",
      `export default {
  name: "bg",
  model: "anthropic:claude-sonnet-4-6",
  plugins: [{ name: "lingerer", version: "1.0.0", setup(ctx) {
    ctx.on("turn.post_turn", () => new Promise(() => { setInterval(() => {}, 1_000); }), { await: "background" });
  } }],
};\n`,
    );
    server.enqueue({ text: "Done quickly.", api: "anthropic" });
    const run = await timedKeel(["run", "hello"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "300" }),
    });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(6_000);
    expect(run.stdout).toContain("Done quickly.");
    expect(run.stderr).toMatch(/still running.*handler lingerer:turn\.post_turn/);
    expect(terminal(await onlySession(s.home)).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a session.end handler that never settles cannot hold the exit: closing is given up after the grace + 1 s", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "session-end",
      `export default {
  name: "end",
  model: "anthropic:claude-sonnet-4-6",
  plugins: [{ name: "never-ends", version: "1.0.0", setup(ctx) {
    ctx.on("session.end", () => new Promise(() => { setInterval(() => {}, 1_000); }), { timeoutMs: 60_000 });
  } }],
};\n`,
    );
    server.enqueue({ text: "Bye.", api: "anthropic" });
    const run = await timedKeel(["run", "hello"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "200" }),
    });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(6_000);
    expect(run.stdout).toContain("Bye.");
    expect(run.stderr).toContain("closing did not finish within 1200 ms");
    expect(run.stderr).toContain("exiting while work is still running");
    expect(terminal(await onlySession(s.home)).map((e) => e.type)).toEqual(["turn.completed"]);
  });

  it("a tool that ignores its signal past its timeout: the turn goes on, and the process exits right after it, naming the tool", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "tool-timeout",
      `export default {
  name: "tool-timeout",
  model: "anthropic:claude-sonnet-4-6",
  toolTimeouts: { info: 300 },
  tools: [{ name: "stubborn", description: "Ignores its signal.", execute: () => new Promise((r) => setTimeout(() => r("too late"), 60_000)) }],
};\n`,
    );
    const from = server.requests.length;
    server.enqueue(
      { toolCalls: [{ id: "call_t", name: "stubborn", args: {} }], api: "anthropic" },
      { text: "The tool timed out.", api: "anthropic" },
    );
    const run = await timedKeel(["run", "go"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "200" }),
    });
    expect(run.killed).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(6_000);
    expect(run.stderr).toMatch(/still running.*tool stubborn \(call call_t\)/);
    expect(server.requests.slice(from)).toHaveLength(2);
    expect(JSON.stringify(server.requests[from + 1]!.body.messages)).toContain("KEEL_TOOL_TIMEOUT");
    const p = pairing(await onlySession(s.home));
    expect(p.results.get("call_t")).toBe(1);
  });
});

describe.concurrent("hangs: SIGINT", { timeout: 120_000 }, () => {
  it("SIGINT during a hanging stream cancels the turn and exits 130; the turn is recorded interrupted", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "sigint-stream",
      `export default { name: "sigint", model: { model: "anthropic:claude-sonnet-4-6", idleTimeoutMs: 0, firstByteTimeoutMs: 0 } };\n`,
    );
    const from = server.requests.length;
    server.enqueue({ hang: "before_headers", api: "anthropic" });
    let sentAt = 0;
    const run = await timedKeel(["run", "hello"], {
      cwd: s.dir,
      env: online(server, s.home),
      during: (child) =>
        until(() => server.requests.length > from).then(() => ((sentAt = performance.now()), child.kill("SIGINT"))),
    });
    expect(performance.now() - sentAt).toBeLessThan(5_000);
    expect(run.duringError).toBeUndefined();
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(130);
    expect(sentAt).toBeGreaterThan(0);
    expect(run.stderr).toContain("cancelling the turn");
    const end = terminal(await onlySession(s.home));
    expect(end.map((e) => e.type)).toEqual(["turn.interrupted"]);
    await server.settled(from);
    expect(server.requests[from]!.outcome).toBe("client_closed");
  });

  it("SIGINT during a tool that ignores its signal exits 130 with the call paired", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "sigint-tool",
      `export default {
  name: "sigint-tool",
  model: "anthropic:claude-sonnet-4-6",
  tools: [{ name: "stubborn", description: "Ignores its signal.", execute: () => new Promise((r) => setTimeout(() => r("too late"), 60_000)) }],
};\n`,
    );
    server.enqueue({ toolCalls: [{ id: "call_s", name: "stubborn", args: {} }], api: "anthropic" });
    const run = await timedKeel(["run", "go"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "200" }),
      during: (child, out) => until(() => out.stderr().includes("→ stubborn")).then(() => child.kill("SIGINT")),
    });
    expect(run.duringError).toBeUndefined();
    expect(run.killed, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(130);
    expect(run.ms).toBeLessThan(8_000);
    const events = await onlySession(s.home);
    const p = pairing(events);
    expect(p.results.get("call_s")).toBe(1);
    expect(p.texts.get("call_s")).toContain("Cancelled");
    expect(terminal(events).map((e) => e.type)).toEqual(["turn.interrupted"]);
  });

  it("a second SIGINT exits 130 at once, even while closing would wait for background work", async () => {
    const server = await wire();
    const s = scenario(
      root,
      "sigint-twice",
      `export default {
  name: "twice",
  model: { model: "anthropic:claude-sonnet-4-6", firstByteTimeoutMs: 0 },
  plugins: [{ name: "lingerer", version: "1.0.0", setup(ctx) {
    ctx.on("turn.post_turn", () => new Promise(() => { setInterval(() => {}, 1_000); }), { await: "background" });
  } }],
};\n`,
    );
    const from = server.requests.length;
    server.enqueue({ hang: "before_headers", api: "anthropic" });
    let secondAt = 0;
    const run = await timedKeel(["run", "hello"], {
      cwd: s.dir,
      env: online(server, s.home, { KEEL_EXIT_GRACE_MS: "30000" }),
      during: (child, out) =>
        until(() => server.requests.length > from)
          .then(() => child.kill("SIGINT"))
          .then(() => until(() => out.stderr().includes("keel: interrupted (aborted)")))
          .then(() => ((secondAt = performance.now()), child.kill("SIGINT"))),
    });
    const seen = `code ${run.code}, signal ${run.signal}, killed ${run.killed}, ${Math.round(run.ms)} ms, stderr:\n${run.stderr}`;
    expect(secondAt, seen).toBeGreaterThan(0);
    expect(performance.now() - secondAt, seen).toBeLessThan(3_000);
    expect(run.duringError, seen).toBeUndefined();
    expect(run.killed, seen).toBe(false);
    expect(run.code, seen).toBe(130);
    expect(run.ms, seen).toBeLessThan(8_000);
    expect(run.stderr).toContain("interrupted while closing");
    expect(terminal(await onlySession(s.home)).map((e) => e.type)).toEqual(["turn.interrupted"]);
  });
});

// Concurrent with the blocks around it (its three runs stay in order inside its one scenario), so
// it does not split the file into rounds that wait for each other's slowest scenario; its runs
// queue for the CLI slots like theirs, so its timeout is the same hang bound (each run's own is 15 s).
describe.concurrent("hangs: the tokenizer's cache file", { timeout: 120_000 }, () => {
  it.runIf(process.platform !== "win32")(
    "a FIFO, then /dev/zero, in the place of the o200k cache file: the run decodes the ranks again, counts exactly and exits at once",
    async () => {
      const server = await wire();
      const cache = join(root, "tokenizer-cache");
      // 112 KB of input (an argument holds at most 128 KB): past half the ceiling of a 200k window, so the count must be exact and the vocabulary loads.
      const input = `${"Release notes for the team, line by line. ".repeat(2_600)}\nSummarise them.`;
      const counts: unknown[] = [];
      for (const [name, spoil] of [
        ["fresh", undefined],
        ["fifo", (f: string) => execFileSync("mkfifo", [f])],
        ["zero", (f: string) => symlinkSync("/dev/zero", f)],
      ] as const) {
        if (spoil) {
          const [file] = readdirSync(cache).filter((f) => f.startsWith("o200k-"));
          expect(file).toBeDefined();
          rmSync(join(cache, file!));
          spoil(join(cache, file!));
        }
        const s = scenario(
          root,
          `tokenizer-${name}`,
          `export default { name: "tok", model: "anthropic:claude-sonnet-4-6" };\n`,
        );
        server.enqueue({ text: "Summarised.", api: "anthropic" });
        const run = await timedKeel(["run", input], {
          cwd: s.dir,
          env: online(server, s.home, { KEEL_CACHE_DIR: cache }),
        });
        expect(run.killed, run.stderr).toBe(false);
        expect(run.code, run.stderr).toBe(0);
        expect(run.ms).toBeLessThan(15_000);
        const compiled = (await onlySession(s.home)).find((e) => e.type === "prompt.compiled") as
          | { manifest: { tokenEstimate: { exact: boolean; messages: number } } }
          | undefined;
        expect(compiled?.manifest.tokenEstimate.exact).toBe(true);
        counts.push(compiled!.manifest.tokenEstimate.messages);
      }
      expect(new Set(counts).size).toBe(1);
      // The spoiled entry was replaced by a good cache file again.
      expect(readdirSync(cache).filter((f) => f.startsWith("o200k-") && !f.endsWith(".tmp"))).toHaveLength(1);
    },
  );
});

// A run of `keel run hi` offline takes 1-5 s here (no compile cache on these paths); a hang is
// forever (Node's recursive mkdir spins under /proc, a FIFO's open waits for a writer and
// outlives SIGTERM). The cap is an upper bound on a hang, not a speed target; a scenario makes at
// most two runs and may queue behind the others for the two CLI slots.
const CAP_MS = 60_000;
describe.concurrent("hangs: nothing Keel creates or enables at start waits on a path it has not checked (issue 30)", {
  timeout: 3 * CAP_MS,
}, () => {
  /** Env of an offline run that lets keel's own compile-cache code run (no NODE_COMPILE_CACHE, no opt-out). */
  const startEnv = (home: string, extra: Record<string, string>) => {
    const env = cleanEnv({ KEEL_HOME: home, KEEL_OFFLINE: "1", ...extra });
    for (const k of [
      "NODE_COMPILE_CACHE",
      "KEEL_NO_COMPILE_CACHE",
      ...("XDG_CACHE_HOME" in extra ? ["KEEL_CACHE_DIR"] : []),
    ])
      delete env[k];
    return env;
  };
  const fifo = (path: string) => {
    execFileSync("mkfifo", [path]);
    return path;
  };

  const caches: Array<[string, () => Record<string, string>, RegExp]> = [
    [
      "KEEL_CACHE_DIR=/proc/self (Node's recursive mkdir spins there forever)",
      () => ({ KEEL_CACHE_DIR: "/proc/self" }),
      /\/proc\/self\/node-compile-cache \(from KEEL_CACHE_DIR\) is in \/proc, a kernel file system/,
    ],
    [
      "XDG_CACHE_HOME=/proc/self",
      () => ({ XDG_CACHE_HOME: "/proc/self" }),
      /\/proc\/self\/keel\/node-compile-cache \(from XDG_CACHE_HOME\) is in \/proc, a kernel file system/,
    ],
    [
      "KEEL_CACHE_DIR=/dev/zero",
      () => ({ KEEL_CACHE_DIR: "/dev/zero" }),
      /\/dev\/zero\/node-compile-cache \(from KEEL_CACHE_DIR\) is in \/dev, a kernel file system/,
    ],
    [
      "KEEL_CACHE_DIR naming a FIFO",
      () => ({ KEEL_CACHE_DIR: fifo(join(root, `cache-fifo-${process.hrtime.bigint()}`)) }),
      /node-compile-cache \(from KEEL_CACHE_DIR\) is not a folder/,
    ],
    [
      "KEEL_CACHE_DIR a folder other users may write to (its compiled code would be run)",
      () => {
        const dir = join(root, `cache-shared-${process.hrtime.bigint()}`);
        mkdirSync(join(dir, "node-compile-cache"), { recursive: true });
        chmodSync(join(dir, "node-compile-cache"), 0o777);
        return { KEEL_CACHE_DIR: dir };
      },
      /node-compile-cache \(from KEEL_CACHE_DIR\) may be written by other users/,
    ],
  ];
  for (const [name, setting, said] of caches) {
    it.runIf(process.platform === "linux")(
      `the compile cache with ${name}: keel starts without it, at once, and says so`,
      async () => {
        const s = scenario(
          root,
          `cache-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 40)}`,
          `export default { name: "cache" };\n`,
        );
        const run = await timedKeel(["run", "hi"], { cwd: s.dir, env: startEnv(s.home, setting()), capMs: CAP_MS });
        expect(run.killed, `keel hung at start and was killed after ${CAP_MS} ms`).toBe(false);
        expect(run.code, run.stderr).toBe(0);
        expect(run.stdout).toContain("You said: hi");
        expect(run.stderr).toMatch(/keel: compiled code is not cached: /);
        expect(run.stderr).toMatch(said);
      },
    );
  }

  it.runIf(process.platform === "linux")(
    "KEEL_HOME under /proc: a located KEEL_HOME_INVALID at once (creating it spun forever)",
    async () => {
      const s = scenario(root, "home-proc", `export default { name: "home" };\n`);
      const run = await timedKeel(["run", "hi"], {
        cwd: s.dir,
        env: startEnv("/proc/self/keel-home", {}),
        capMs: CAP_MS,
      });
      expect(run.killed, "keel hung at start").toBe(false);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain(
        "KEEL_HOME_INVALID (at KEEL_HOME): KEEL_HOME: /proc/self/keel-home is in /proc, a kernel file system",
      );
    },
  );

  it.runIf(process.platform === "linux")(
    "an offline script that is a FIFO: KEEL_CONFIG_INVALID naming it, never a wait for a writer",
    async () => {
      const s = scenario(
        root,
        "script-fifo",
        `export default { name: "script", offline: { script: "./script.json" } };\n`,
      );
      fifo(join(s.dir, "script.json"));
      const run = await timedKeel(["run", "hi"], { cwd: s.dir, env: startEnv(s.home, {}), capMs: CAP_MS });
      expect(run.killed, "keel waited on the FIFO").toBe(false);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain(
        `offline.script "./script.json" could not be read as JSON: ${join(s.dir, "script.json")} is not a regular file (a FIFO)`,
      );
    },
  );

  it.runIf(process.platform === "linux")(
    "a SKILL.md linked to a FIFO in the home's skills: the skill is skipped with a warning naming it, the turn runs",
    async () => {
      const skills = pathToFileURL(join(REPO, "packages", "plugin-skills", "src", "index.ts")).href;
      const s = scenario(
        root,
        "skill-fifo",
        `import skills from ${JSON.stringify(skills)};\nexport default { name: "skills", plugins: [skills()] };\n`,
      );
      mkdirSync(join(s.home, "skills", "fifo-skill"), { recursive: true });
      mkdirSync(join(s.home, "skills", "good-skill"), { recursive: true });
      writeFileSync(
        join(s.home, "skills", "good-skill", "SKILL.md"),
        "---\nname: good-skill\ndescription: Deploys the service to staging.\n---\nRun the deploy script.\n",
      );
      symlinkSync(fifo(join(root, "skill-fifo.md")), join(s.home, "skills", "fifo-skill", "SKILL.md"));
      const run = await timedKeel(["run", "hi"], { cwd: s.dir, env: startEnv(s.home, {}), capMs: CAP_MS });
      expect(run.killed, "keel waited on the FIFO").toBe(false);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr.replace(/\s+/g, " ")).toContain(`KEEL_SKILL_INVALID`);
      expect(run.stderr.replace(/\s+/g, " ")).toContain(`fifo-skill/SKILL.md is not a regular file (a FIFO)`);
    },
  );

  it.runIf(process.platform === "linux")(
    "keel init into /proc, and keel init --force over a FIFO: KEEL_INIT_REFUSED at once, naming what is in the way",
    async () => {
      const s = scenario(root, "init-fifo", `export default { name: "init" };\n`);
      const proc = await timedKeel(["init", "/proc/self/new-agent"], {
        cwd: s.dir,
        env: startEnv(s.home, {}),
        capMs: CAP_MS,
      });
      expect(proc.killed, "keel init spun under /proc").toBe(false);
      expect(proc.code, proc.stderr).toBe(2);
      expect(proc.stderr).toContain(
        "KEEL_INIT_REFUSED (at /proc/self/new-agent): /proc/self/new-agent is in /proc, a kernel file system",
      );
      const dir = join(s.dir, "agent");
      mkdirSync(dir);
      fifo(join(dir, "agent.config.ts"));
      const forced = await timedKeel(["init", "--force", "agent"], {
        cwd: s.dir,
        env: startEnv(s.home, {}),
        capMs: CAP_MS,
      });
      expect(forced.killed, "keel init waited for a reader of the FIFO").toBe(false);
      expect(forced.code, forced.stderr).toBe(2);
      expect(forced.stderr).toContain(
        "agent has agent.config.ts, which is not a regular file (a FIFO, device or folder)",
      );
    },
  );
});
