/**
 * Fault class 14: trust, round 3. What a host relies on may not vanish, and nothing Keel
 * starts outlives it.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { EXIT_WAIT_MS } from "../../packages/plugin-mcp/src/index.ts";
import { cleanEnv, tempRoot, until } from "./support/hangs.ts";
import { keel, project, STACK } from "./support/adversarial-a.ts";
import type { Live, Run } from "./support/adversarial-a.ts";
import { childrenConfig, killLeft, leftAfter, serversUp, STUCK, startedServers } from "./support/trust-children.ts";
import type { ChildrenConfig } from "./support/trust-children.ts";

/**
 * "A child process Keel spawns ends when Keel exits, in every exit path." Each scenario runs
 * the real `keel` with four stdio MCP servers that never answer (`trust-mcp.mjs`): one that
 * ignores the end of its stdin (`mute`), one that also ignores SIGTERM, SIGINT and SIGHUP
 * (`stubborn`), and a wrapper like `npx` whose grandchild ignores all of that (`wrapped`); most
 * also have a `ready` server, so the turn goes on while the others are still starting. Once
 * keel has exited by the scenario's path, no process carrying the scenario's marker is left
 * (zombies excepted: they have ended) within LEFT_BOUND_MS. Before the fix the MCP SDK's
 * transport ended the server's own process only, and only if keel lived 2 s more; nothing
 * ended a server on process.exit, on a signal keel did not handle, or when the close grace ran out.
 */
describe.runIf(process.platform === "linux").concurrent("child processes end with keel", { timeout: 180_000 }, () => {
  const root = tempRoot("keel-fault-trust-children-");
  /**
   * Every path ends the servers before keel is gone: the close ends them (stdin, then SIGTERM,
   * then SIGKILL, `stopGraceMs` apart) within the close, and the last resort at exit or on an
   * unhandled signal sends SIGTERM, waits at most EXIT_WAIT_MS and sends SIGKILL before
   * returning. So what remains after the exit is only a killed process's teardown: EXIT_WAIT_MS
   * plus a second's margin for a busy machine.
   */
  const LEFT_BOUND_MS = EXIT_WAIT_MS + 1_000;
  const env = (home: string, extra: Record<string, string> = {}) => cleanEnv({ KEEL_HOME: home, ...extra });
  type Step = {
    args: string[];
    env?: Record<string, string>;
    during?: (live: Live, pids: string) => Promise<unknown>;
    check: (run: Run) => void;
  };

  /** Run `steps` (keel processes, one after the other) on one config; after each, nothing of its servers is left. */
  async function exitPath(name: string, config: Omit<ChildrenConfig, "marker" | "dir">, steps: Step[]): Promise<void> {
    const marker = `keel-fault-14-${name}-${randomBytes(4).toString("hex")}`;
    const dir = join(root, name);
    const pids = join(dir, "pids");
    mkdirSync(pids, { recursive: true });
    const p = project(root, name, childrenConfig({ ...config, marker, dir: pids }));
    try {
      for (const step of steps) {
        const run = await keel(step.args, {
          cwd: p.dir,
          env: env(p.home, step.env),
          capMs: 90_000,
          ...(step.during ? { during: (l: Live) => step.during!(l, pids) } : {}),
        });
        expect(run.killed, run.stderr).toBe(false);
        expect(run.duringError, run.stderr).toBeUndefined();
        expect(await leftAfter(marker, LEFT_BOUND_MS), `left running after keel exited (${name})`).toEqual([]);
        // Not vacuous: every server was running while keel was, and keel left by the scenario's path.
        expect([...startedServers(pids).keys()].sort()).toEqual([...STUCK, ...(config.ready ? ["ready"] : [])].sort());
        step.check(run);
        expect(run.stderr).not.toMatch(STACK);
      }
    } finally {
      killLeft(marker);
    }
  }

  /**
   * Ending the stubborn servers takes 2 × stopGraceMs (stdin, SIGTERM, SIGKILL): 200 ms here,
   * so a close is not two idle seconds; the close-grace scenario keeps the default (1 s), as
   * it needs that ending to outlast keel's 1 s close grace.
   */
  const STOP_GRACE_MS = 200;
  const stuck = { ready: true, stuckConnectTimeoutMs: 60_000, stopGraceMs: STOP_GRACE_MS };
  /** With --json, stdout shows the request being built once the turn runs (its model then hangs). */
  const turnRunning = (l: Live, pids: string) =>
    serversUp(pids).then(() => until(() => l.stdout().includes('"prompt.compiled"'), 60_000));

  it("the turn ends normally (exit 0): the close ends every server, the wrapper's grandchild included", () =>
    exitPath("normal", { ...stuck, script: [{ text: "done" }] }, [
      { args: ["run", "hello"], check: (r) => expect(r.code, r.stderr).toBe(0) },
    ]));

  it("the turn fails (exit 1, the provider refused the key)", () =>
    exitPath("error", { ...stuck, script: [{ error: { class: "auth", message: "invalid x-api-key" } }] }, [
      { args: ["run", "hello"], check: (r) => expect(r.code, r.stderr).toBe(1) },
    ]));

  it("exit 2 on a usage error found after the servers started (--mode on a session paused for approval)", () =>
    exitPath(
      "usage-after-start",
      {
        ...stuck,
        code: `const review = definePlugin({ name: "review", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => (e.call.name === "deploy" ? { kind: "tool_decision", decision: "ask", reason: "deploys are reviewed" } : undefined)); } });`,
        plugins: "review",
        tools: `{ name: "deploy", description: "Deploys.", execute: () => "deployed" }`,
        script: [{ toolCalls: [{ id: "d1", name: "deploy", args: {} }] }],
      },
      [
        // Asked on stdin, which ends: the turn stays paused (exit 130).
        { args: ["run", "--ask", "ask", "deploy it"], check: (r) => expect(r.code, r.stderr).toBe(130) },
        {
          args: ["run", "-c", "--mode", "chat", "hello"],
          check: (r) => (expect(r.code, r.stderr).toBe(2), expect(r.stderr).toContain("KEEL_MODE_INVALID")),
        },
      ],
    ));

  it("Ctrl-C once: the turn is cancelled (exit 130)", () =>
    exitPath("sigint", { ...stuck, script: [{ hang: true }] }, [
      {
        args: ["run", "--json", "hello"],
        during: (l, pids) => turnRunning(l, pids).then(() => l.child.kill("SIGINT")),
        check: (r) => (expect(r.code, r.stderr).toBe(130), expect(r.stderr).toContain("cancelling the turn")),
      },
    ]));

  it("Ctrl-C twice: keel exits at once through process.exit (exit 130)", () =>
    exitPath("sigint-twice", { ...stuck, script: [{ hang: true }] }, [
      {
        args: ["run", "--json", "hello"],
        during: async (l, pids) => {
          await turnRunning(l, pids);
          l.child.kill("SIGINT");
          await until(() => l.stderr().includes("cancelling the turn"), 60_000);
          l.child.kill("SIGINT");
        },
        check: (r) => (
          expect(r.code, r.stderr).toBe(130),
          expect(r.stderr).toMatch(/interrupted twice; exiting now|interrupted while closing; exiting now/)
        ),
      },
    ]));

  it("SIGTERM during the turn (exit 143)", () =>
    exitPath("sigterm", { ...stuck, script: [{ hang: true }] }, [
      {
        args: ["run", "--json", "hello"],
        during: (l, pids) => turnRunning(l, pids).then(() => l.child.kill("SIGTERM")),
        check: (r) => (expect(r.code, r.stderr).toBe(143), expect(r.stderr).toContain("terminated (SIGTERM)")),
      },
    ]));

  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    it(`${sig} while session.start waits for the servers, which keel does not handle yet: the servers end, then the signal ends keel as it would have`, () =>
      exitPath(
        `${sig.toLowerCase()}-at-start`,
        {
          ready: false,
          stuckConnectTimeoutMs: 60_000,
          stopGraceMs: STOP_GRACE_MS,
          script: [{ text: "never reached" }],
        },
        [
          {
            args: ["run", "hello"],
            during: (l, pids) => serversUp(pids).then(() => l.child.kill(sig)),
            check: (r) => expect([r.code, r.signal], r.stderr).toEqual([null, sig]),
          },
        ],
      ));
  }

  it("SIGHUP during the turn (the terminal closed; keel has no handler for it)", () =>
    exitPath("sighup", { ...stuck, script: [{ hang: true }] }, [
      {
        args: ["run", "--json", "hello"],
        during: (l, pids) => turnRunning(l, pids).then(() => l.child.kill("SIGHUP")),
        check: (r) => expect([r.code, r.signal], r.stderr).toEqual([null, "SIGHUP"]),
      },
    ]));

  it("an uncaught exception from a plugin timer, caught by the process guard (exit 1)", () =>
    exitPath(
      "guard",
      {
        ...stuck,
        code: `const thrower = definePlugin({ name: "thrower", version: "1.0.0", setup(ctx) { ctx.on("turn.pre_prompt_compile", () => { setTimeout(() => { throw new Error("timer boom"); }, 20); }); } });`,
        plugins: "thrower",
        script: [{ delayMs: 500, text: "late" }],
      },
      [
        {
          args: ["run", "hello"],
          check: (r) => (
            expect(r.code, r.stderr).toBe(1), expect(r.stderr).toContain('KEEL_PROCESS_FAULT (plugin "thrower"')
          ),
        },
      ],
    ));

  it("a tool calls process.exit(0) (exit 1): no close runs, the exit event ends the servers", () =>
    exitPath(
      "tool-exit",
      {
        ...stuck,
        tools: `{ name: "quit", description: "Exits the process.", execute: () => { process.exit(0); } }`,
        script: [{ toolCalls: [{ id: "q1", name: "quit", args: {} }] }],
      },
      [
        {
          args: ["run", "hello"],
          check: (r) => (
            expect(r.code, r.stderr).toBe(1), expect(r.stderr).toContain('Code of tool "quit" called process.exit(0)')
          ),
        },
      ],
    ));

  it("the close grace runs out (KEEL_EXIT_GRACE_MS=0: 1 s, shorter than ending the stubborn servers takes)", () =>
    exitPath("close-grace", { ...stuck, stopGraceMs: undefined, script: [{ text: "done" }] }, [
      {
        args: ["run", "hello"],
        env: { KEEL_EXIT_GRACE_MS: "0" },
        check: (r) => (
          expect(r.code, r.stderr).toBe(0), expect(r.stderr).toContain("closing did not finish within 1000 ms")
        ),
      },
    ]));

  it("servers that never answer initialize fail their connect timeout mid-turn, and the run ends 1 s later (exit 0)", () =>
    exitPath(
      "connect-timeout",
      {
        ready: true,
        stuckConnectTimeoutMs: 400,
        stopGraceMs: STOP_GRACE_MS,
        script: [{ delayMs: 1_500, text: "done" }],
      },
      [
        {
          args: ["run", "hello"],
          check: (r) => (expect(r.code, r.stderr).toBe(0), expect(r.stderr).toContain("no answer within 400 ms")),
        },
      ],
    ));
});
