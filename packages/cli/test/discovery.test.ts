/** Config discovery in every file form, parent search, --config, and one kernel copy. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import * as kernel from "@keel/kernel";
import { buildAgent, loadConfig } from "../src/index.ts";
import { runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-discovery-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
function project(files: Record<string, string>): string {
  const dir = join(root, `p${n++}`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

const FORMS: Record<string, string> = {
  "agent.config.ts":
    'import { defineConfig } from "@keel/agent";\nconst name: string = "from-ts";\nexport default defineConfig({ name });\n',
  "agent.config.mts":
    'import { defineConfig } from "@keel/agent";\nexport default defineConfig({ name: "from-mts" as string });\n',
  "agent.config.cts":
    'const { defineConfig } = require("@keel/kernel");\nmodule.exports = defineConfig({ name: "from-cts" as string });\n',
  "agent.config.js": 'import { defineConfig } from "@keel/agent";\nexport default defineConfig({ name: "from-js" });\n',
  "agent.config.mjs": 'export default { name: "from-mjs" };\n',
  "agent.config.cjs": 'module.exports = { name: "from-cjs" };\n',
  "agent.config.json": '{ "name": "from-json" }\n',
  "package.json": '{ "name": "pkg", "keel": { "name": "from-package-json" } }\n',
};

describe("config discovery", () => {
  it.each(Object.entries(FORMS))("finds and loads %s", async (file, text) => {
    const dir = project({
      [file]: text,
      ...(file === "package.json" ? {} : { "package.json": '{ "name": "x", "type": "module" }\n' }),
    });
    const loaded = await loadConfig({ cwd: dir });
    expect(loaded.filepath).toBe(join(dir, file));
    const expected = file === "package.json" ? "from-package-json" : `from-${file.split(".").pop()}`;
    expect((loaded.config as { name: string }).name).toBe(expected);
  });

  it("searches parent folders up to the project root, and --config wins", async () => {
    const dir = project({
      "package.json": '{ "name": "x" }\n',
      "agent.config.json": '{ "name": "top" }\n',
      "src/deep/x.txt": "",
      "other.config.json": '{ "name": "explicit" }\n',
    });
    expect(((await loadConfig({ cwd: join(dir, "src", "deep") })).config as { name: string }).name).toBe("top");
    expect(
      ((await loadConfig({ cwd: join(dir, "src"), configPath: "../other.config.json" })).config as { name: string })
        .name,
    ).toBe("explicit");
  });

  it("a config outside any install gets the host's @keel/kernel (same classes, same functions)", async () => {
    const dir = project({
      "agent.config.ts":
        'import * as k from "@keel/kernel";\nimport { definePlugin } from "@keel/kernel";\nconst p = definePlugin({ name: "probe", version: "1.0.0", setup() {} });\nexport default { name: "probe", plugins: [p], marker: [k.KeelError, k.definePlugin, k.PHASES] };\n',
    });
    const loaded = await loadConfig({ cwd: dir });
    const [KeelErrorClass, definePluginFn, phases] = (loaded.config as { marker: unknown[] }).marker;
    expect(KeelErrorClass).toBe(kernel.KeelError);
    expect(definePluginFn).toBe(kernel.definePlugin);
    expect(phases).toBe(kernel.PHASES);
  });

  it("falsy plugins are ignored, package names are imported relative to the config and called with their options", async () => {
    const dir = project({
      "node_modules/keel-plugin-greet/package.json":
        '{ "name": "keel-plugin-greet", "type": "module", "main": "index.js" }\n',
      "node_modules/keel-plugin-greet/index.js":
        'export default (opts = {}) => ({ name: "greet", version: "1.2.3", input: opts, setup(ctx) { ctx.on("turn.pre_prompt_context", () => ({ kind: "prompt_context", id: "g", domain: "greet", content: "Hello " + (opts.who ?? "you") })); } });\n',
      "agent.config.mjs":
        'export default { name: "pkgs", plugins: [false, null, ["keel-plugin-greet", { who: "team" }], process.env.NEVER_SET_X && "nope"], offline: { script: { steps: [{ text: "hi" }] } } };\n',
    });
    const built = await buildAgent(await loadConfig({ cwd: dir }), { env: {}, home: join(dir, ".keel") });
    try {
      expect(built.offline).toBe(true);
      expect(built.agent.registry.plugins.map((p) => `${p.name}@${p.version}`)).toEqual(["greet@1.2.3"]);
      const session = await built.agent.session();
      await session.run("x");
      const compiled = (await session.events()).find((e) => e.type === "prompt.compiled");
      expect(compiled?.type === "prompt.compiled" && compiled.manifest.context).toEqual([
        {
          id: "g",
          domain: "greet",
          chars: "Hello team".length,
          plugin: "greet",
          hash: expect.stringMatching(/^[0-9a-f]{16}$/),
        },
      ]);
    } finally {
      await built.agent.close();
    }
  });

  it("the real binary runs a TypeScript config found in its working folder", async () => {
    const dir = project({
      "agent.config.ts":
        'import { defineConfig } from "@keel/agent";\nexport default defineConfig({ name: "bin", offline: { script: { steps: [{ text: "ran from the binary" }] } } });\n',
    });
    const run = await runKeel(["run", "go"], {
      cwd: dir,
      env: { ...process.env, KEEL_HOME: join(dir, ".keel"), ANTHROPIC_API_KEY: "" },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("ran from the binary");
    expect(run.stderr).toContain("keel: offline");
  });
});
