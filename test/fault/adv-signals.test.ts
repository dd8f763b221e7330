/**
 * Adversarial signal scenarios against the CLI's one SIGINT/SIGTERM listener (packages/cli/src/exit.ts):
 * bursts, mixed signals, hostile plugins that touch the process's signal listeners, keel chat and
 * keel goal. The real `keel` binary with the offline scripted model (or the wire server); each
 * asserts the exit, a bound on the time, the stored turn and no stack trace.
 */
import { describe, expect, it } from "vitest";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { cleanEnv, onlySession, storedSessions, until, useWirePerScenario } from "./support/hangs.ts";
import { KERNEL, STACK, keel, project } from "./support/adversarial-a.ts";
import type { Live, Run } from "./support/adversarial-a.ts";
import { childrenConfig, killLeft, leftAfter, serversUp } from "./support/trust-children.ts";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const { root } = useWirePerScenario("keel-fault-adv-signals-");
const REPEAT = Number(process.env.ADV_REPEAT ?? 1);
const env = (home: string, extra: Record<string, string> = {}) =>
  cleanEnv({ KEEL_HOME: home, KEEL_EXIT_GRACE_MS: "300", ...extra });
const ends = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && e.type !== "turn.started").map((e) => e.type);
const starts = (events: readonly KeelEvent[]) => events.filter((e) => e.type === "turn.started").length;
const seen = (r: Run) =>
  `code ${r.code}, signal ${r.signal}, killed ${r.killed}, ${Math.round(r.ms)} ms, duringError ${r.duringError}\nstderr:\n${r.stderr}`;
/** With --json, stdout shows the request being built once the turn runs (the offline model then hangs). */
const turnRunning = (l: Live) => until(() => l.stdout().includes('"prompt.compiled"'), 40_000);
const config = (body: string) => `import { defineConfig, definePlugin } from ${JSON.stringify(KERNEL)};
${body}
`;
let n = 0;
const name = (s: string) => `${s}-${++n}`;

describe.concurrent("adversarial signals: keel run", { timeout: 120_000 }, () => {
  for (let i = 0; i < REPEAT; i++) {
    it(`a plugin that removes every SIGINT/SIGTERM listener in setup: Ctrl-C still cancels the turn (exit 130, interrupted once) #${i}`, async () => {
      const p = project(
        root,
        name("remove-all"),
        config(`export default defineConfig({
  name: "remove-all",
  plugins: [definePlugin({ name: "rude", version: "1.0.0", setup() { process.removeAllListeners("SIGINT"); process.removeAllListeners("SIGTERM"); } })],
  offline: { script: [{ hang: true }] },
});`),
      );
      const r = await keel(["run", "--json", "hello"], {
        cwd: p.dir,
        env: env(p.home),
        capMs: 60_000,
        during: (l) => turnRunning(l).then(() => l.child.kill("SIGINT")),
      });
      expect(r.killed, seen(r)).toBe(false);
      expect([r.code, r.signal], seen(r)).toEqual([130, null]);
      expect(r.stderr).not.toMatch(STACK);
      expect(ends(await onlySession(p.home)), seen(r)).toEqual(["turn.interrupted"]);
    });

    it(`a plugin that listens to SIGINT itself (a no-op): Ctrl-C still cancels the turn (exit 130) #${i}`, async () => {
      const p = project(
        root,
        name("own-listener"),
        config(`export default defineConfig({
  name: "own-listener",
  plugins: [definePlugin({ name: "listener", version: "1.0.0", setup() { process.on("SIGINT", () => {}); process.on("SIGTERM", () => {}); } })],
  offline: { script: [{ hang: true }] },
});`),
      );
      const r = await keel(["run", "--json", "hello"], {
        cwd: p.dir,
        env: env(p.home),
        capMs: 60_000,
        during: (l) => turnRunning(l).then(() => l.child.kill("SIGINT")),
      });
      expect(r.killed, seen(r)).toBe(false);
      expect([r.code, r.signal], seen(r)).toEqual([130, null]);
      expect(r.stderr).not.toMatch(STACK);
      expect(ends(await onlySession(p.home)), seen(r)).toEqual(["turn.interrupted"]);
    });

    for (const burst of [
      ["SIGINT", "SIGINT", "SIGINT"],
      ["SIGTERM", "SIGINT"],
      ["SIGINT", "SIGTERM"],
      ["SIGTERM", "SIGTERM", "SIGTERM"],
    ] as const) {
      it(`${burst.join("+")} within a millisecond during the turn: exits at once, no stack trace #${i}`, async () => {
        const p = project(
          root,
          name(`burst-${burst.join("-")}`),
          config(`export default defineConfig({ name: "burst", offline: { script: [{ hang: true }] } });`),
        );
        let sentAt = 0;
        const r = await keel(["run", "--json", "hello"], {
          cwd: p.dir,
          env: env(p.home),
          capMs: 60_000,
          during: (l) =>
            turnRunning(l).then(() => {
              sentAt = performance.now();
              for (const s of burst) l.child.kill(s);
            }),
        });
        expect(r.killed, seen(r)).toBe(false);
        expect(performance.now() - sentAt, seen(r)).toBeLessThan(5_000);
        // Which of two different signals is read first is the kernel's choice: the status is the one read second.
        expect(r.signal, seen(r)).toBeNull();
        expect(new Set(burst).size === 1 ? [burst[0] === "SIGTERM" ? 143 : 130] : [130, 143], seen(r)).toContain(
          r.code,
        );
        expect(r.stderr).not.toMatch(STACK);
        const events = await onlySession(p.home);
        // Exiting at once may leave the turn open (it is closed when the session is resumed), never closed twice.
        expect(ends(events).length, seen(r)).toBeLessThanOrEqual(1);
        expect(starts(events)).toBe(1);
        console.log(`[burst ${burst.join("+")}] ends=${JSON.stringify(ends(events))} code=${r.code}`);
      });
    }
  }
});

const review = `const review = definePlugin({ name: "review", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => (e.call.name === "deploy" ? { kind: "tool_decision", decision: "ask", reason: "deploys are reviewed" } : undefined)); } });`;
const deploy = `{ name: "deploy", description: "Deploys.", execute: () => "deployed" }`;

describe.concurrent("adversarial signals: phases", { timeout: 120_000 }, () => {
  for (let i = 0; i < REPEAT; i++) {
    it(`a second Ctrl-C during the exit linger (a stray interval keeps the process alive) exits 130, not death by SIGINT #${i}`, async () => {
      const p = project(
        root,
        name("linger"),
        config(`export default defineConfig({
  name: "linger",
  plugins: [definePlugin({ name: "stray", version: "1.0.0", setup(ctx) {
    setInterval(() => {}, 1_000);
    ctx.on("session.end", () => { process.stderr.write("ADV session.end\\n"); setTimeout(() => process.kill(process.pid, "SIGINT"), 100); });
  } })],
  offline: { script: [{ hang: true }] },
});`),
      );
      const r = await keel(["run", "--json", "hello"], {
        cwd: p.dir,
        env: env(p.home, { KEEL_EXIT_GRACE_MS: "0" }),
        capMs: 60_000,
        during: (l) => turnRunning(l).then(() => l.child.kill("SIGINT")),
      });
      const events = await onlySession(p.home);
      console.log(
        `[linger] code=${r.code} signal=${r.signal} closing=${r.stderr.includes("while closing")} ends=${JSON.stringify(ends(events))}`,
      );
      expect(r.killed, seen(r)).toBe(false);
      expect(r.stderr).toContain("ADV session.end");
      expect([r.code, r.signal], seen(r)).toEqual([130, null]);
      expect(ends(events)).toEqual(["turn.interrupted"]);
    });

    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      it(`${sig} while keel run asks for approval on a piped stdin that stays open: exits (${sig === "SIGTERM" ? 143 : 130}) within seconds #${i}`, async () => {
        const p = project(
          root,
          name(`ask-${sig}`),
          config(`${review}
export default defineConfig({ name: "ask", plugins: [review], tools: [${deploy}], offline: { script: [{ toolCalls: [{ id: "d1", name: "deploy", args: {} }] }, { text: "done" }] } });`),
        );
        let sentAt = 0;
        const r = await keel(["run", "--ask", "ask", "deploy it"], {
          cwd: p.dir,
          env: env(p.home),
          stdin: [],
          endStdin: false,
          capMs: 20_000,
          during: (l) =>
            until(() => l.stderr().includes("  > "), 40_000).then(
              () => ((sentAt = performance.now()), l.child.kill(sig)),
            ),
        });
        const events = await onlySession(p.home);
        console.log(
          `[ask ${sig}] code=${r.code} signal=${r.signal} killed=${r.killed} after=${Math.round(performance.now() - sentAt)}ms ends=${JSON.stringify(ends(events))}`,
        );
        expect(r.killed, seen(r)).toBe(false);
        expect(performance.now() - sentAt, seen(r)).toBeLessThan(5_000);
        expect([r.code, r.signal], seen(r)).toEqual([sig === "SIGTERM" ? 143 : 130, null]);
        expect(r.stderr).toContain("the turn stays paused for approval");
        expect(ends(events)).toEqual(["turn.paused"]);
        expect(r.stderr).not.toMatch(STACK);
      });
    }

    it(`Ctrl-C while keel chat asks for approval: the chat goes on and /exit leaves it #${i}`, async () => {
      const p = project(
        root,
        name("chat-ask"),
        config(`${review}
export default defineConfig({ name: "chat-ask", plugins: [review], tools: [${deploy}], offline: { script: [{ toolCalls: [{ id: "d1", name: "deploy", args: {} }] }, { text: "done" }, { text: "second answer" }] } });`),
      );
      let sentAt = 0;
      const r = await keel(["chat", "--ask", "ask"], {
        cwd: p.dir,
        env: env(p.home),
        stdin: ["deploy it"],
        endStdin: false,
        capMs: 20_000,
        during: async (l) => {
          await until(() => l.stderr().includes("[y] allow once"), 40_000);
          sentAt = performance.now();
          l.child.kill("SIGINT");
          await until(() => l.stderr().includes("the turn stays paused for approval"), 10_000);
          l.child.stdin!.write("/exit\n");
        },
      });
      const events = await onlySession(p.home);
      console.log(
        `[chat ask] code=${r.code} signal=${r.signal} killed=${r.killed} after=${Math.round(performance.now() - sentAt)}ms ends=${JSON.stringify(ends(events))}\n${r.stderr}`,
      );
      expect(r.killed, seen(r)).toBe(false);
      expect(r.code, seen(r)).toBe(0);
      expect(performance.now() - sentAt, seen(r)).toBeLessThan(8_000);
      expect(ends(events)).toEqual(["turn.paused"]);
      expect(r.stderr).not.toMatch(STACK);
    });

    it(`keel goal: SIGTERM during a turn exits 143 and the turn is recorded interrupted #${i}`, async () => {
      const p = project(
        root,
        name("goal-term"),
        config(`export default defineConfig({ name: "goal-term", offline: { script: [{ hang: true }] } });`),
      );
      const r = await keel(["goal", "--json", "do it", "--turns", "3"], {
        cwd: p.dir,
        env: env(p.home),
        capMs: 30_000,
        during: (l) => turnRunning(l).then(() => l.child.kill("SIGTERM")),
      });
      const events = await onlySession(p.home);
      console.log(`[goal SIGTERM] code=${r.code} signal=${r.signal} ends=${JSON.stringify(ends(events))}\n${r.stderr}`);
      expect(r.killed, seen(r)).toBe(false);
      expect([r.code, r.signal], seen(r)).toEqual([143, null]);
      expect(ends(events), seen(r)).toEqual(["turn.interrupted"]);
    });

    it(`keel goal: Ctrl-C between turns stops the run (exit 130) #${i}`, async () => {
      const p = project(
        root,
        name("goal-int"),
        config(
          `export default defineConfig({ name: "goal-int", offline: { script: [{ text: "step one" }, { text: "step two", delayMs: 3000 }, { text: "three" }] } });`,
        ),
      );
      const r = await keel(["goal", "do it", "--turns", "3", "--every", "9"], {
        cwd: p.dir,
        env: env(p.home),
        capMs: 30_000,
        during: (l) => until(() => l.stderr().includes("goal turn 1:"), 40_000).then(() => l.child.kill("SIGINT")),
      });
      const all = await storedSessions(p.home);
      console.log(`[goal SIGINT] code=${r.code} signal=${r.signal} ends=${JSON.stringify(all.map(ends))}\n${r.stderr}`);
      expect(r.killed, seen(r)).toBe(false);
      expect([r.code, r.signal], seen(r)).toEqual([130, null]);
      expect(r.stderr).not.toMatch(STACK);
    });

    it(`SIGINT while a plugin's session.start runs (no phase yet): ends by SIGINT, and the next run on the session works #${i}`, async () => {
      const p = project(
        root,
        name("session-start"),
        config(`export default defineConfig({
  name: "session-start",
  plugins: [definePlugin({ name: "slow-start", version: "1.0.0", setup(ctx) {
    ctx.on("session.start", async () => { process.stderr.write("ADV session.start\\n"); if (process.env.ADV_SLOW_START) await new Promise((r) => setTimeout(r, 3000)); });
  } })],
  offline: { script: [{ text: "first" }, { text: "second" }] },
});`),
      );
      // Only the first run's session.start is slow (the one the signal lands in); the next run's is not waited for.
      const r = await keel(["run", "hello"], {
        cwd: p.dir,
        env: env(p.home, { ADV_SLOW_START: "1" }),
        capMs: 30_000,
        during: (l) => until(() => l.stderr().includes("ADV session.start"), 40_000).then(() => l.child.kill("SIGINT")),
      });
      console.log(`[session.start] code=${r.code} signal=${r.signal}\n${r.stderr}`);
      expect(r.killed, seen(r)).toBe(false);
      expect([r.code, r.signal], seen(r)).toEqual([null, "SIGINT"]);
      const next = await keel(["run", "-c", "again"], { cwd: p.dir, env: env(p.home), capMs: 30_000 });
      console.log(`[session.start next] code=${next.code}\n${next.stderr}`);
      expect(next.code, seen(next)).toBe(0);
    });
  }
});

describe.concurrent("adversarial signals: MCP servers", { timeout: 120_000 }, () => {
  for (let i = 0; i < REPEAT; i++) {
    for (const where of ["setup", "session.start"] as const) {
      it(`a plugin removing every SIGINT listener in ${where}, stdio MCP servers running, Ctrl-C during the turn: nothing is left running #${i}`, async () => {
        const marker = `keel-adv-signals-${where.replace(".", "-")}-${i}-${process.pid}`;
        const dir = join(root, marker);
        const pids = join(dir, "pids");
        mkdirSync(pids, { recursive: true });
        const rude =
          where === "setup"
            ? `const rude = definePlugin({ name: "rude", version: "1.0.0", setup() { process.removeAllListeners("SIGINT"); process.removeAllListeners("SIGTERM"); } });`
            : `const rude = definePlugin({ name: "rude", version: "1.0.0", setup(ctx) { ctx.on("session.start", () => { process.removeAllListeners("SIGINT"); process.removeAllListeners("SIGTERM"); }); } });`;
        const p = project(
          root,
          marker,
          childrenConfig({
            marker,
            dir: pids,
            ready: true,
            stuckConnectTimeoutMs: 60_000,
            script: [{ hang: true }],
            code: rude,
            plugins: "rude",
          }),
        );
        try {
          const r = await keel(["run", "--json", "hello"], {
            cwd: p.dir,
            env: env(p.home),
            capMs: 60_000,
            during: (l) =>
              serversUp(pids)
                .then(() => turnRunning(l))
                .then(() => l.child.kill("SIGINT")),
          });
          const left = await leftAfter(marker, 1_500);
          const events = await onlySession(p.home);
          console.log(
            `[mcp ${where}] code=${r.code} signal=${r.signal} left=${left.length} ends=${JSON.stringify(ends(events))}`,
          );
          expect(r.killed, seen(r)).toBe(false);
          expect(left, seen(r)).toEqual([]);
          expect([r.code, r.signal], seen(r)).toEqual([130, null]);
        } finally {
          killLeft(marker);
        }
      });
    }
  }
});
