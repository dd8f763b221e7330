/**
 * CLI conventions a user of git, npm, pi or claude expects, through the real binary: --version,
 * per-command help, usage on stderr, input from stdin, --model, -c/--continue, exit codes, an
 * old Node refused in one line, and what to try after the first run in a home.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { startWireServer } from "@keel/wire-server";
import type { WireServer } from "@keel/wire-server";
import { COMMAND_HELP, ENVIRONMENT } from "../src/help.ts";
import { renderer } from "../src/render.ts";
import { KEEL_BIN, REPO, offlineEnv, runKeel as spawnKeel } from "./support/run-keel.ts";
import { gate } from "./support/gate.ts";

const root = mkdtempSync(join(tmpdir(), "keel-conventions-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const minimal = join(REPO, "examples", "minimal", "agent.config.ts");
const CLI_PKG = JSON.parse(readFileSync(join(REPO, "packages", "cli", "package.json"), "utf8")) as { version: string };
const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as KeelEvent);
const inputOf = (stdout: string) =>
  (events(stdout).find((e) => e.type === "turn.started") as { input?: string } | undefined)?.input;
const sessionOf = (stderr: string) => /session ([0-9a-f-]{36})/.exec(stderr)?.[1];

// The blocks run concurrently (each scenario has its own project and home); their processes take
// turns two at a time. Runs with no options (help, usage, --version) read nothing of a project or a
// home, so one process answers each such command line for the whole file.
const slot = gate(2);
/** A scenario may wait its turn for the gate: its timeout is a hang bound, not a speed bound. */
const QUEUED = { timeout: 120_000 };
const printed = new Map<string, ReturnType<typeof spawnKeel>>();
function runKeel(args: string[], options?: Parameters<typeof spawnKeel>[1]): ReturnType<typeof spawnKeel> {
  if (options) return slot(() => spawnKeel(args, options));
  const key = JSON.stringify(args);
  if (!printed.has(key))
    printed.set(
      key,
      slot(() => spawnKeel(args)),
    );
  return printed.get(key)!;
}

/** A project with no model (the echo model answers) and its own home. */
function project(name = "conv"): { dir: string; env: NodeJS.ProcessEnv; home: string } {
  const dir = mkdtempSync(join(root, "p-"));
  writeFileSync(join(dir, "agent.config.mjs"), `export default { name: ${JSON.stringify(name)} };\n`);
  const home = join(dir, ".keel");
  return { dir, home, env: offlineEnv({ KEEL_HOME: home }) };
}

describe.concurrent("--version, help, usage", QUEUED, () => {
  it("--version and -v print the CLI's package.json version on stdout, exit 0", async () => {
    for (const r of await Promise.all(["--version", "-v"].map((flag) => runKeel([flag])))) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${CLI_PKG.version}\n`);
      expect(r.stderr).toBe("");
    }
  });

  it("keel run --help and keel help run print the same: usage, examples and the environment run reads", async () => {
    const [a, b] = await Promise.all([runKeel(["run", "--help"]), runKeel(["help", "run"])]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    expect(a.stdout).toMatch(/^keel run — /);
    for (const part of [
      "usage:",
      "examples:",
      "environment:",
      "--model SPEC",
      "-c, --continue",
      "KEEL_HOME",
      "KEEL_OFFLINE",
      "ANTHROPIC_API_KEY",
      "OPENAI_API_KEY",
      "OPENAI_BASE_URL",
      "KEEL_EXIT_GRACE_MS",
      "KEEL_STDIN_WAIT_MS",
      "130",
      "143",
    ])
      expect(a.stdout).toContain(part);
    expect(a.stdout).not.toContain("keel chat — ");
  });

  it("keel help studio says what the studio does with its token, as the README and the page do: a header, never a cookie", async () => {
    const help = (await runKeel(["help", "studio"])).stdout.replace(/\s+/g, " ");
    const readme = readFileSync(join(REPO, "packages", "cli", "README.md"), "utf8")
      .replace(/`/g, "")
      .replace(/\s+/g, " ");
    for (const [where, text] of [
      ["keel help studio", help],
      ["the README", readme],
    ] as const) {
      expect(text, where).toContain("never a cookie, which every port of 127.0.0.1 would receive");
      expect(text, where).toContain("Authorization header");
      expect(text, where).not.toMatch(/(keeps|kept|stores?) (it|the token) in a[^.]*cookie/);
    }
    // What the page does: the token goes in a header; it never touches a cookie.
    const page = readFileSync(join(REPO, "packages", "cli", "src", "studio", "app.js"), "utf8");
    expect(page).toContain("authorization: `Bearer ${TOKEN}`");
    expect(page).not.toMatch(/document\.cookie/);
  });

  it("every command in the help table has its help (2-3 examples), and --help lists every command", async () => {
    const commands = Object.entries(COMMAND_HELP);
    const [overview, ...helps] = await Promise.all([
      runKeel(["--help"]),
      ...commands.map(([command]) => runKeel([command, "--help"])),
    ]);
    expect(overview!.code).toBe(0);
    for (const [i, [command, h]] of commands.entries()) {
      expect(overview!.stdout).toContain(`  ${command} `);
      expect(h.examples.length).toBeGreaterThanOrEqual(1);
      expect(h.examples.length).toBeLessThanOrEqual(3);
      const r = helps[i]!;
      expect(r.code, `${command}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^keel ${command} — `));
      for (const e of h.env) expect(r.stdout).toContain(`  ${e} `);
    }
  });

  it("the environment table names only variables the code reads, and every KEEL_* the CLI reads is in it", () => {
    const sources = ["cli", "kernel", "agent", "safe-path", "providers"]
      .flatMap((p) =>
        readdirSync(join(REPO, "packages", p, "src"), { recursive: true }).map((f) =>
          join(REPO, "packages", p, "src", String(f)),
        ),
      )
      .filter((f) => f.endsWith(".ts") && !f.endsWith("help.ts"));
    const code = sources.map((f) => readFileSync(f, "utf8")).join("\n");
    for (const name of Object.keys(ENVIRONMENT)) expect(code, name).toMatch(new RegExp(`\\b${name}\\b`));
    const cli = sources
      .filter((f) => f.startsWith(join(REPO, "packages", "cli", "src")))
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    for (const [, name] of cli.matchAll(/env\.(KEEL_[A-Z_]+)/g)) expect(Object.keys(ENVIRONMENT)).toContain(name);
  });

  it("keel alone prints the overview on stderr (stdout empty), exit 2; usage errors go to stderr too", async () => {
    const usage = [["help", "frobnicate"], ["frobnicate"], ["run", "--bogus", "x"]];
    const [bare, ...runs] = await Promise.all([runKeel([]), ...usage.map((args) => runKeel(args))]);
    expect(bare!.code).toBe(2);
    expect(bare!.stdout).toBe("");
    expect(bare!.stderr).toContain("commands:");
    for (const [i, args] of usage.entries()) {
      const r = runs[i]!;
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain("KEEL_CLI_USAGE");
    }
  });

  it("help and the CLI README state every exit status: 0 1 2 3 130 141 143", async () => {
    const help = (await runKeel(["--help"])).stdout;
    const readme = readFileSync(join(REPO, "packages", "cli", "README.md"), "utf8");
    for (const code of ["0", "1", "2", "3", "130", "141", "143"]) {
      expect(help).toMatch(new RegExp(`(^|[ :])${code} `, "m"));
      expect(readme).toMatch(new RegExp(`\\| \`${code}\` \\|`));
    }
  });
});

describe.concurrent("keel run: input from stdin", QUEUED, () => {
  it("`echo … | keel run` and `keel run -` take stdin as the input", async () => {
    const p = project();
    const piped = await runKeel(["run", "--json"], {
      cwd: p.dir,
      env: p.env,
      stdin: ["summarise the logs", "line two"],
    });
    expect(piped.code, piped.stderr).toBe(0);
    expect(inputOf(piped.stdout)).toBe("summarise the logs\nline two");
    const dash = await runKeel(["run", "--json", "-"], { cwd: p.dir, env: p.env, stdin: ["from the dash"] });
    expect(dash.code, dash.stderr).toBe(0);
    expect(inputOf(dash.stdout)).toBe("from the dash");
  });

  it('`keel run "question" < piped` appends stdin as context between <stdin> lines', async () => {
    const p = project();
    const r = await runKeel(["run", "--json", "review", "this"], {
      cwd: p.dir,
      env: p.env,
      stdin: ["diff --git a/x b/x", "+added"],
    });
    expect(r.code, r.stderr).toBe(0);
    expect(inputOf(r.stdout)).toBe("review this\n\n<stdin>\ndiff --git a/x b/x\n+added\n</stdin>");
  });

  it("empty stdin and no argument is a usage error, exit 2", async () => {
    const p = project();
    const r = await runKeel(["run"], { cwd: p.dir, env: p.env, stdin: ["   "] });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("keel run needs the input");
    expect(existsSync(p.home)).toBe(false);
  });

  it("an argument with a stdin nobody writes to: keel goes on without it after KEEL_STDIN_WAIT_MS and says so", async () => {
    const p = project();
    let t0 = 0;
    // Timed from its own start, not from its turn in the queue.
    const r = await slot(() => {
      t0 = performance.now();
      return spawnKeel(["run", "--json", "just this"], {
        cwd: p.dir,
        env: { ...p.env, KEEL_STDIN_WAIT_MS: "150" },
        keepStdin: true,
      });
    });
    expect(r.code, r.stderr).toBe(0);
    expect(inputOf(r.stdout)).toBe("just this");
    expect(r.stderr).toContain("stdin gave nothing within 150 ms; going on without it");
    expect(performance.now() - t0).toBeLessThan(8_000);
  });
});

describe.concurrent("keel run --model", QUEUED, () => {
  let server: WireServer;
  beforeAll(async () => {
    server = await startWireServer();
  });
  afterAll(() => server.close());

  it("replaces the config's model: the anthropic example answers through openai:gpt-4.1", async () => {
    const from = server.requests.length;
    server.enqueue({ text: "Answered by the override.", api: "responses" });
    const env = offlineEnv({
      KEEL_HOME: join(root, "model-home"),
      OPENAI_API_KEY: "sk-test",
      OPENAI_BASE_URL: server.openaiBaseURL,
    });
    const r = await runKeel(["run", "--config", minimal, "--model", "openai:gpt-4.1", "Hello?"], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("keel: model openai:gpt-4.1");
    expect(r.stdout).toContain("Answered by the override.");
    const reqs = server.requests.slice(from);
    expect(reqs.map((q) => [q.api, q.body.model])).toEqual([["responses", "gpt-4.1"]]);
  });

  it("a chain, repeated or comma-separated: the models without a key are left out, offline names the first", async () => {
    const p = project();
    const chains = [
      ["--model", "anthropic:claude-sonnet-4-6,openai:gpt-4.1"],
      ["--model", "anthropic:claude-sonnet-4-6", "--model", "openai:gpt-4.1"],
    ];
    for (const r of await Promise.all(
      chains.map((args) => runKeel(["run", ...args, "hi"], { cwd: p.dir, env: p.env })),
    )) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain("ANTHROPIC_API_KEY / OPENAI_API_KEY is not set");
      expect(r.stderr).toContain("Set the API key to use anthropic:claude-sonnet-4-6");
    }
  });

  it("a malformed spec is the config's model error, located at --model, exit 2 before anything starts", async () => {
    const p = project();
    const specs = [
      ["gpt-4.1", '"gpt-4.1"'],
      ["openai:gpt-4.1,claude", '"claude"'],
    ] as const;
    const runs = await Promise.all(
      specs.map(([value]) => runKeel(["run", "--model", value, "hi"], { cwd: p.dir, env: p.env })),
    );
    for (const [i, [, found]] of specs.entries()) {
      const r = runs[i]!;
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        "KEEL_CLI_USAGE (at --model): --model: expected <provider>:<model>, with provider anthropic, openai, openai-compatible or scripted",
      );
      expect(r.stderr).toContain(`(found ${found})`);
      expect(existsSync(p.home)).toBe(false);
    }
  });
});

describe.concurrent("-c / --continue", QUEUED, () => {
  it("continues the most recent session of this agent in this home; with none it starts one and says so", async () => {
    const p = project("continuing");
    const first = await runKeel(["run", "-c", "first"], { cwd: p.dir, env: p.env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('no earlier session of agent "continuing"');
    const id = sessionOf(first.stderr);
    const second = await runKeel(["run", "--continue", "--json", "second"], { cwd: p.dir, env: p.env });
    expect(second.code, second.stderr).toBe(0);
    expect(events(second.stdout)[0]).toMatchObject({ type: "session.resumed", sessionId: id });
    const chat = await runKeel(["chat", "-c"], { cwd: p.dir, env: p.env, stdin: ["third", "/exit"] });
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stderr).toContain(`session ${id}`);
  });

  it("-c before a config path is a usage error pointing at --config; --continue excludes --session", async () => {
    const p = project();
    const [old, both] = await Promise.all([
      runKeel(["run", "-c", "agent.config.mjs", "hi"], { cwd: p.dir, env: p.env }),
      runKeel(["run", "-c", "--session", "x", "hi"], { cwd: p.dir, env: p.env }),
    ]);
    expect(old.code).toBe(2);
    expect(old.stderr).toContain("-c is --continue");
    expect(old.stderr).toContain("--config agent.config.mjs");
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--continue picks the most recent session; it excludes --session");
  });
});

describe.concurrent("first run in a home", QUEUED, () => {
  it("after the first completed turn, stderr says where the session went and what to try; the next run does not", async () => {
    const p = project();
    const first = await runKeel(["run", "hi"], { cwd: p.dir, env: p.env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain(`this was the first session in ${p.home}`);
    for (const next of ["keel chat -c", 'keel run -c "…"', "keel init", "keel help run", "docs/plugins.md"])
      expect(first.stderr).toContain(next);
    expect(first.stdout).not.toContain("keel chat");
    const again = await runKeel(["run", "hi"], { cwd: p.dir, env: p.env });
    expect(again.stderr).not.toContain("first session");
  });

  it("--home is a path from the working folder, and plugin databases follow it (nothing lands in KEEL_HOME)", async () => {
    const dir = mkdtempSync(join(root, "home-flag-"));
    const elsewhere = join(dir, "KEEL_HOME-unused");
    const r = await runKeel(
      [
        "run",
        "--config",
        join(REPO, "examples", "full-stack", "agent.config.ts"),
        "--home",
        "here",
        "Remember that release day is Thursday, then tell me what is left in TODO.md",
      ],
      { cwd: dir, env: offlineEnv({ KEEL_HOME: elsewhere }) },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(join(dir, "here")).sort()).toEqual(
      expect.arrayContaining(["memory.sqlite", "sessions.sqlite", "skills.sqlite"]),
    );
    expect(existsSync(elsewhere)).toBe(false);
    expect(r.stderr).toContain("keel run -c --config");
    expect(r.stderr).toContain("--home here");
  }, 120_000);
});

describe.concurrent("the slow-phase line", QUEUED, () => {
  it("names the phase, when it runs and the plugins in it, then how long it took and who took it", async () => {
    const out: string[] = [];
    const r = renderer(
      { out: () => {}, err: (t) => out.push(t) },
      {
        json: false,
        slowPhaseMs: 20,
        phaseInfo: (phase) => ({ runs: `once, for ${phase}`, plugins: ["@keel/plugin-mcp", "@keel/plugin-memory"] }),
      },
    );
    r.listener({ type: "phase.started", sessionId: "s", turnId: null, phase: "session.start" } as never);
    await new Promise((res) => setTimeout(res, 60));
    r.listener({
      type: "phase.completed",
      phase: "session.start",
      durationMs: 812.4,
      handlers: [
        { plugin: "@keel/plugin-memory", subscription: "m", status: "ok", durationMs: 3, contributions: 0 },
        { plugin: "@keel/plugin-mcp", subscription: "x", status: "ok", durationMs: 801, contributions: 0 },
      ],
      contributions: [],
    } as never);
    r.dispose();
    expect(out).toEqual([
      "  … phase session.start is still running after 20 ms (it runs once, for session.start; plugins working in it: @keel/plugin-mcp, @keel/plugin-memory)\n",
      "  … session.start took 812 ms (@keel/plugin-mcp 801 ms, @keel/plugin-memory 3 ms)\n",
    ]);
  });
});

describe.concurrent("an unsupported Node", QUEUED, () => {
  const old = ["/usr/bin/node", "/usr/local/bin/node", "/bin/node"].find((n) => {
    try {
      const [major, minor] = execFileSync(n, ["-p", "process.versions.node"], { encoding: "utf8" })
        .trim()
        .split(".")
        .map(Number);
      return major! < 22 || (major === 22 && minor! < 13);
    } catch {
      return false;
    }
  });

  it.skipIf(!old)(
    "bin/keel.js on Node < 22.13 prints one line (which Node, which is needed, how to get it), exit 2",
    () => {
      let code = 0;
      let stderr = "";
      let stdout = "";
      try {
        stdout = execFileSync(old!, [KEEL_BIN, "run", "hi"], {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
          cwd: root,
        });
      } catch (err) {
        const e = err as { status: number; stderr: string; stdout: string };
        code = e.status;
        stderr = e.stderr;
        stdout = e.stdout;
      }
      const version = execFileSync(old!, ["-p", "process.versions.node"], { encoding: "utf8" }).trim();
      expect(code).toBe(2);
      expect(stdout).toBe("");
      expect(stderr.trim().split("\n")).toHaveLength(1);
      expect(stderr).toContain(`Node ${version}`);
      expect(stderr).toContain("22.13");
      expect(stderr).toContain("npx -y -p node@24");
      expect(stderr).not.toMatch(/\n\s+at |ERR_|SyntaxError/);
    },
  );
});
