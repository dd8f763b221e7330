/**
 * Fault class 8, CLI hygiene: a reader that goes away, configs that throw, export the wrong
 * thing, hang or sit on something unreadable, and plugin entries written wrong. Every scenario
 * spawns the real `keel` binary with a config in a temp folder and checks the exit status, a
 * bound on time, and that stderr names the file and the path with no stack trace.
 */
import { execFileSync } from "node:child_process";
import { rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LOAD_TIMEOUT_MS, ROOT, expectLocated, expectNoStack, keel, project } from "./support/cli.ts";

afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const CONFIG = "agent.config.ts";
/** A plugin factory, as a plugin package would export it. */
const FACTORY = `function memory(options: unknown = {}) { return { name: "memory", version: "1.0.0", setup() {} }; }`;
const ASYNC_FACTORY = `async function memory() { return { name: "memory", version: "1.0.0", setup() {} }; }`;
const OTHER = `{ name: "other", version: "1.0.0", setup() {} }`;

/** A project whose agent.config.ts is `text`, and its config's absolute path. */
function config(text: string, more: Record<string, string> = {}): { dir: string; file: string } {
  const dir = project({ [CONFIG]: text, ...more });
  return { dir, file: join(dir, CONFIG) };
}

describe.concurrent("fault/cli: a reader that goes away (EPIPE) is never a crash", { timeout: 120_000 }, () => {
  const echo = `export default { name: "pipes", offline: { script: { steps: [{ text: "first answer" }, { text: "second answer" }] } } };`;
  const hang = `export default { name: "hang", offline: { script: { steps: [{ hang: true }] } } };`;
  const seeded = (async () => {
    const p = config(echo);
    for (const input of ["one", "two"]) {
      const r = await keel(["run", "--new", input], { cwd: p.dir });
      expect(r.code, r.stderr).toBe(0);
    }
    const list = await keel(["sessions", "list"], { cwd: p.dir });
    return { ...p, id: list.stdout.split(" ")[0]! };
  })();

  it("sessions list into a closed pipe exits 0 quietly", async () => {
    const { dir } = await seeded;
    const run = await keel(["sessions", "list"], { cwd: dir, closeStdout: true });
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeLessThan(15_000);
    expect(run.stderr).toBe("");
  });

  it("sessions show ID (and --json) into a closed pipe exits 0 quietly", async () => {
    const { dir, id } = await seeded;
    for (const args of [
      ["sessions", "show", id],
      ["sessions", "show", "--json", id],
    ]) {
      const run = await keel(args, { cwd: dir, closeStdout: true });
      expect(run.code, run.stderr).toBe(0);
      expect(run.ms).toBeLessThan(15_000);
      expect(run.stderr).toBe("");
    }
  });

  it("schema and --help into a closed pipe exit 0 quietly", async () => {
    const { dir } = await seeded;
    for (const args of [["schema"], ["--help"]]) {
      const run = await keel(args, { cwd: dir, closeStdout: true });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toBe("");
    }
  });

  it("inspect and inspect --json into a closed pipe exit 0 quietly", async () => {
    const { dir } = await seeded;
    for (const args of [["inspect"], ["inspect", "--json"]]) {
      const run = await keel(args, { cwd: dir, closeStdout: true });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toBe("");
    }
  });

  it("run --json whose reader leaves after one line cancels the turn, exits 141 within 5 s, and the session records the interruption", async () => {
    const p = config(hang);
    const run = await keel(["run", "--json", "--new", "wait for me"], { cwd: p.dir, closeStdoutAfterLines: 1 });
    expect(run.code, run.stderr).toBe(141);
    expect(run.msAfterClose).toBeLessThan(5_000);
    expect(JSON.parse(run.stdout.split("\n")[0]!)).toMatchObject({ type: "session.created" });
    expectNoStack(run.stderr);
    const list = await keel(["sessions", "list", "--json"], { cwd: p.dir });
    const [session] = JSON.parse(list.stdout) as Array<{ id: string }>;
    const shown = await keel(["sessions", "show", "--json", session!.id], { cwd: p.dir });
    const types = shown.stdout
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { type: string }).type);
    expect(types.at(-1)).toBe("turn.interrupted");
  });

  it("a config error with stdout and stderr both closed still exits 2, not a crash", async () => {
    const p = config(`export default null;`);
    const run = await keel(["run", "hi"], { cwd: p.dir, closeStdout: true, closeStderr: true });
    expect(run.code).toBe(2);
    expect(run.signal).toBeNull();
  });
});

describe.concurrent("fault/cli: every config value is read inside a guard", { timeout: 120_000 }, () => {
  it("a config getter that throws is KEEL_CONFIG_READ_FAILED at its path, exit 2", async () => {
    const p = config(`export default { name: "g", get plugins() { throw new Error("plugins are not ready"); } };`);
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_READ_FAILED",
      file: p.file,
      path: "plugins",
      says: ["plugins are not ready"],
    });
  });

  it("a plugin object whose property getter throws is located at that property", async () => {
    const p = config(
      `export default { plugins: [{ name: "p", get version(): string { throw new TypeError("no version"); }, setup() {} }] };`,
    );
    expectLocated(await keel(["inspect"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_READ_FAILED",
      file: p.file,
      path: "plugins[0].version",
      says: ["TypeError: no version"],
    });
  });

  it("a class-instance plugin whose prototype getter throws is located before the kernel reads it", async () => {
    const p = config(
      `class P { version = "1.0.0"; get name(): string { throw new Error("nameless"); } setup() {} }\nexport default { plugins: [false, new P()] };`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_READ_FAILED",
      file: p.file,
      path: "plugins[1].name",
      says: ["nameless"],
    });
  });

  it("a Proxy whose get trap throws is located at the key read", async () => {
    const p = config(
      `const limits = new Proxy({ maxRounds: 3 }, { get() { throw new RangeError("trap"); } });\nexport default { limits };`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_READ_FAILED",
      file: p.file,
      path: "limits.maxRounds",
      says: ["RangeError: trap"],
    });
  });

  it("sessions list reads the config inside the same guard (exit 2, not 1)", async () => {
    const p = config(`export default { get name() { throw new Error("which agent?"); } };`);
    expectLocated(await keel(["sessions", "list"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_READ_FAILED",
      file: p.file,
      path: "name",
      says: ["which agent?"],
    });
  });
});

describe.concurrent("fault/cli: a default export that is not a config is named for what it is", {
  timeout: 120_000,
}, () => {
  const cases: Array<[string, string, string]> = [
    ["null", "export default null;", "the config file exports null; export an object from defineConfig({ ... })"],
    [
      "undefined",
      "export default undefined;",
      "the config file exports undefined; export an object from defineConfig({ ... })",
    ],
    ["a number", "export default 42;", "the config file exports a number (42)"],
    [
      "a string",
      `export default "anthropic:claude-sonnet-4-6";`,
      `the config file exports a string ("anthropic:claude-sonnet-4-6")`,
    ],
    [
      "a Promise",
      `export default (async () => ({ name: "late" }))();`,
      "the config file exports a Promise; await inside the file instead",
    ],
    ["an array", `export default [{ name: "a" }];`, "the config file exports an array"],
    [
      "a plugin",
      `export default ${OTHER};`,
      "the config file exports a plugin, not a config; put it in the plugins list",
    ],
    [
      "defineConfig itself",
      `import { defineConfig } from "@keel/agent";\nexport default defineConfig;`,
      "exports defineConfig itself; call it",
    ],
  ];
  it.each(cases)("export default %s: KEEL_CONFIG_INVALID saying so, not 'no config found'", async (_, text, says) => {
    const p = config(text);
    const run = await keel(["run", "hi"], { cwd: p.dir });
    expectLocated(run, { code: "KEEL_CONFIG_INVALID", file: p.file, path: "default export", says: [says] });
    expect(run.stderr).not.toContain("KEEL_CONFIG_NOT_FOUND");
  });
});

describe.concurrent("fault/cli: plugin entries written wrong get a specific hint at their index", {
  timeout: 120_000,
}, () => {
  const hint = async (
    text: string,
    path: string,
    says: string,
    more: Record<string, string> = {},
    code = "KEEL_CONFIG_INVALID",
  ) => {
    const p = config(text, more);
    const run = await keel(["run", "hi"], { cwd: p.dir });
    expectLocated(run, { code, file: p.file, path, says: [says] });
    expect(run.stderr).not.toContain("Invalid input");
  };

  it("a factory not called (memory for memory())", () =>
    hint(
      `${FACTORY}\nexport default { plugins: [${OTHER}, memory] };`,
      "plugins[1]",
      "plugins[1]: this is the plugin factory itself; call it: memory()",
    ));

  it("an async factory's result (a Promise)", () =>
    hint(
      `${ASYNC_FACTORY}\nexport default { plugins: [${OTHER}, memory()] };`,
      "plugins[1]",
      "plugins[1] is a Promise: await the factory",
    ));

  it("an async factory not called", () =>
    hint(
      `${ASYNC_FACTORY}\nexport default { plugins: [memory] };`,
      "plugins[0]",
      "it is async; call it and await it: await memory()",
    ));

  it("a class instead of an instance", () =>
    hint(
      `class Audit { name = "audit"; version = "1.0.0"; setup() {} }\nexport default { plugins: [Audit] };`,
      "plugins[0]",
      "plugins[0] is the class Audit; a plugin is an object: create one, e.g. new Audit(...)",
    ));

  it("a list nested in plugins", () =>
    hint(
      `${FACTORY}\nconst stack = [memory(), ${OTHER}];\nexport default { plugins: [stack] };`,
      "plugins[0]",
      "plugins[0] is a list nested in plugins; spread it into the list (plugins: [...list])",
    ));

  it("a module namespace (import * as memory)", () =>
    hint(
      `import * as memory from "./memory.ts";\nexport default { plugins: [memory] };`,
      "plugins[0]",
      "plugins[0] is a module namespace (import * as …), not a plugin; import the default export and call it",
      { "memory.ts": `export default ${FACTORY}\n` },
    ));

  it("[factory, options] instead of factory(options)", () =>
    hint(
      `${FACTORY}\nexport default { plugins: [[memory, { scope: "project" }]] };`,
      "plugins[0]",
      "plugins[0] is [factory, options]; call the factory with its options instead",
    ));

  it("`condition || plugin()` leaves true in the list", () =>
    hint(
      `${FACTORY}\nconst ci = true;\nexport default { plugins: [ci || memory()] };`,
      "plugins[0]",
      "write `condition && plugin()`, not `condition || plugin()`",
    ));

  it("two plugins with one name: KEEL_PLUGIN_DUPLICATE naming both indexes", () =>
    hint(
      `${FACTORY}\nexport default { plugins: [memory(), ${OTHER}, memory({ scope: "user" })] };`,
      "plugins[2]",
      `"memory" appears at plugins[0] and plugins[2]`,
      {},
      "KEEL_PLUGIN_DUPLICATE",
    ));

  it("a plugin package whose factory returns a Promise", () =>
    hint(
      `export default { plugins: [["async-plugin", { topK: 2 }]] };`,
      "plugins[0]",
      `the plugin factory of "async-plugin" returned a Promise`,
      {
        "node_modules/async-plugin/package.json": JSON.stringify({
          name: "async-plugin",
          version: "1.0.0",
          type: "module",
          main: "index.mjs",
        }),
        "node_modules/async-plugin/index.mjs": `export default async function asyncPlugin(options) { return { name: "async-plugin", version: "1.0.0", input: options, setup() {} }; }\n`,
      },
    ));
});

describe.concurrent("fault/cli: a config that cannot load is a coded, located error within a bound", {
  timeout: 120_000,
}, () => {
  it("a syntax error gives line and column", async () => {
    const p = config(`const x = 1;\nexport default {\n  name: "a",,\n};\n`);
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: p.file,
      path: p.file,
      says: [`${p.file}:3:`],
    });
  });

  it("an import of a missing module names the module", async () => {
    const p = config(`import { helper } from "./helpers/missing.ts";\nexport default { name: helper };\n`);
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: p.file,
      path: p.file,
      says: ["Cannot find module './helpers/missing.ts'"],
    });
  });

  it("a config that throws at top level gives the error and the line", async () => {
    const p = config(
      `const url = process.env.NO_SUCH_VAR_FOR_KEEL;\n\nif (!url) throw new TypeError("the config needs NO_SUCH_VAR_FOR_KEEL");\nexport default {};\n`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: p.file,
      says: ["TypeError: the config needs NO_SUCH_VAR_FOR_KEEL", `(at ${p.file}:3)`],
    });
  });

  it("a config that throws with connection strings in its message shows none of their passwords (the full masker, before any agent is built)", async () => {
    // Passwords the kernel's basic rule misses: a "/" or an "@" in the userinfo, a quoted libpq value.
    const p = config(
      `throw new Error("cannot reach postgres://keel:sl/ash-8c1f@db.internal/prod nor postgres://keel:at@sign-8c1f@db.internal/prod nor host=db password='two words-8c1f'");\nexport default {};\n`,
    );
    for (const args of [
      ["run", "hi"],
      ["sessions", "list"],
    ]) {
      const r = await keel(args, { cwd: p.dir });
      expectLocated(r, { code: "KEEL_CONFIG_LOAD_FAILED", file: p.file, says: ["db.internal/prod", "host=db"] });
      expect(r.stdout + r.stderr, args.join(" ")).not.toMatch(/sl\/ash|at@sign|sign-8c1f|two words|8c1f/);
    }
  });

  it("a config that throws a non-Error (throw undefined) is still located", async () => {
    const p = config(`throw undefined;\nexport default {};\n`);
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: p.file,
      path: p.file,
      says: ["threw undefined"],
    });
  });

  it("a top-level await that never settles: KEEL_CONFIG_LOAD_TIMEOUT naming the file, not exit 13", async () => {
    const p = config(`await new Promise(() => {});\nexport default {};\n`);
    const run = await keel(["run", "hi"], { cwd: p.dir });
    expectLocated(run, {
      code: "KEEL_CONFIG_LOAD_TIMEOUT",
      file: p.file,
      path: p.file,
      says: [`within ${LOAD_TIMEOUT_MS} ms`],
      withinMs: LOAD_TIMEOUT_MS + 12_000,
    });
    expect(run.ms).toBeGreaterThanOrEqual(LOAD_TIMEOUT_MS);
  });

  it("a top-level await on a live timer: the same error, and the process still exits", async () => {
    const p = config(`await new Promise((r) => setTimeout(r, 3_600_000));\nexport default {};\n`);
    expectLocated(await keel(["inspect"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_TIMEOUT",
      file: p.file,
      path: p.file,
      withinMs: LOAD_TIMEOUT_MS + 13_000,
    });
  });

  it("a plugin package named in the config that never finishes loading: the same deadline, at its plugins index", async () => {
    const p = config(`export default { plugins: [false, "slow-plugin"] };\n`, {
      "node_modules/slow-plugin/package.json": JSON.stringify({
        name: "slow-plugin",
        version: "1.0.0",
        type: "module",
        main: "index.mjs",
      }),
      "node_modules/slow-plugin/index.mjs": `await new Promise(() => {});\nexport default { name: "slow", version: "1.0.0", setup() {} };\n`,
    });
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_LOAD_TIMEOUT",
      file: p.file,
      path: "plugins[1]",
      says: ["slow-plugin/index.mjs did not finish loading"],
      withinMs: LOAD_TIMEOUT_MS + 12_000,
    });
  });

  it("a circular structure in requestOptions is located where it loops back", async () => {
    const p = config(
      `const extra: Record<string, unknown> = { tag: "x" };\nextra.self = extra;\nexport default { requestOptions: { extra } };\n`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: p.file,
      path: "requestOptions.extra.self",
      says: ["circular structure"],
    });
  });

  it("a config that contains itself terminates with a located error", async () => {
    const p = config(`const c: Record<string, unknown> = { name: "loop" };\nc.limits = c;\nexport default c;\n`);
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: p.file,
      path: "limits",
      says: ["Unrecognized keys"],
    });
  });

  it("a config nested thousands of levels deep is refused with a located error, not a RangeError", async () => {
    const p = config(
      `let o: unknown = 1;\nfor (let i = 0; i < 20000; i++) o = { a: o };\nexport default { requestOptions: { extra: o as Record<string, unknown> } };\n`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: p.file,
      path: "requestOptions.extra.a.a",
      says: ["nests deeper than 256 levels"],
    });
  });

  it("a value shared 2^60 times over in requestOptions is refused at once, not expanded into a request", async () => {
    const p = config(
      `let o: unknown = 1;\nfor (let i = 0; i < 60; i++) o = { a: o, b: o };\nexport default { requestOptions: { extra: o as Record<string, unknown> } };\n`,
    );
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: p.file,
      path: "requestOptions",
      says: ["more than 1000000 values as JSON"],
      withinMs: 12_000,
    });
  });

  it("--config pointing at a folder says so and names the file inside", async () => {
    const p = config(`export default {};\n`);
    const run = await keel(["run", "--config", ".", "hi"], { cwd: p.dir });
    expectLocated(run, {
      code: "KEEL_CONFIG_NOT_FOUND",
      file: p.dir,
      path: p.dir,
      says: ["--config . is a folder, not a config file; did you mean --config agent.config.ts?"],
    });
  });

  it("--config pointing at a missing file names it", async () => {
    const p = config(`export default {};\n`);
    expectLocated(await keel(["run", "--config", "nested/agent.config.ts", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_NOT_FOUND",
      file: join(p.dir, "nested", CONFIG),
      says: ["no such file"],
    });
  });

  it("a FIFO where the config should be is refused at once, not read forever", async () => {
    const dir = project({});
    execFileSync("mkfifo", [join(dir, CONFIG)]);
    expectLocated(await keel(["run", "hi"], { cwd: dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: join(dir, CONFIG),
      says: ["is not a regular file"],
      withinMs: 12_000,
    });
    expectLocated(await keel(["run", "--config", CONFIG, "hi"], { cwd: dir }), {
      code: "KEEL_CONFIG_NOT_FOUND",
      file: join(dir, CONFIG),
      says: ["is not a regular file"],
      withinMs: 12_000,
    });
  });

  it("an empty agent.config.ts is reported as empty, not as 'no config found'", async () => {
    const p = config("\n");
    expectLocated(await keel(["run", "hi"], { cwd: p.dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: p.file,
      path: p.file,
      says: ["is empty"],
    });
  });

  it("agent.config.json holding null says so", async () => {
    const dir = project({ "agent.config.json": "null\n" });
    expectLocated(await keel(["run", "hi"], { cwd: dir }), {
      code: "KEEL_CONFIG_INVALID",
      file: join(dir, "agent.config.json"),
      path: "default export",
      says: ["the config file exports null"],
    });
  });

  it("a working folder removed under keel is a usage error naming it, not a uv_cwd stack trace", async () => {
    const dir = project({});
    expectLocated(await keel(["run", "hi"], { cwd: dir, removeCwdFirst: true }), {
      code: "KEEL_CONFIG_NOT_FOUND",
      file: dir,
      path: dir,
      says: ["no longer exists"],
    });
  });

  it("an unreadable config (a symlink loop) names the file and the system error", async () => {
    const dir = project({});
    symlinkSync(CONFIG, join(dir, CONFIG));
    expectLocated(await keel(["run", "hi"], { cwd: dir }), {
      code: "KEEL_CONFIG_LOAD_FAILED",
      file: join(dir, CONFIG),
      says: ["ELOOP"],
    });
  });
});

describe.concurrent("fault/cli: a home that is not a folder is a config error before any store opens", {
  timeout: 120_000,
}, () => {
  it("KEEL_HOME pointing at a file: KEEL_HOME_INVALID, exit 2 (was KEEL_STORE_FAILED, exit 1)", async () => {
    const p = config(`export default { name: "h" };\n`, { "home-file": "not a folder\n" });
    const run = await keel(["run", "hi"], { cwd: p.dir, env: { KEEL_HOME: join(p.dir, "home-file") } });
    expectLocated(run, {
      code: "KEEL_HOME_INVALID",
      file: join(p.dir, "home-file"),
      path: "KEEL_HOME",
      says: ["is a file, not a folder"],
    });
  });

  it("sessions list with KEEL_HOME under a file and no config: exit 2 naming the file in the way", async () => {
    const dir = project({ "package.json": "{}\n", "home-file": "x\n" });
    const run = await keel(["sessions", "list"], { cwd: dir, env: { KEEL_HOME: join(dir, "home-file", "keel") } });
    expectLocated(run, {
      code: "KEEL_HOME_INVALID",
      file: join(dir, "home-file"),
      path: "KEEL_HOME",
      says: ["is a file, so"],
    });
  });

  it("the config's home pointing at a file is located at home", async () => {
    const p = config(`export default { home: "./data" };\n`, { data: "a file\n" });
    expectLocated(await keel(["inspect"], { cwd: p.dir }), {
      code: "KEEL_HOME_INVALID",
      file: p.file,
      path: "home",
      says: [`${join(p.dir, "data")} is a file, not a folder`],
    });
  });
});
