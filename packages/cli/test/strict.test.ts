/**
 * Plugin CI: a plugin returning a broken contribution is a warning (exit 0) by default, shown
 * whole with every issue; --strict and KEEL_STRICT=1 make the same run exit 1 with
 * KEEL_STRICT_FAILED naming the plugin and phase. The real binary, offline.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-strict-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// A prompt_section missing id, sectionId and domain, with a long plugin name so the message passes 160 characters.
writeFileSync(
  join(root, "agent.config.mjs"),
  `export default {
  name: "strict-demo",
  model: "anthropic:claude-sonnet-4-6",
  plugins: [{
    name: "acme-house-rules-for-the-support-desk-agent",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => ({ kind: "prompt_section", content: "Answer in French." }));
    },
  }],
};
`,
);
const env = (extra: Record<string, string> = {}) =>
  offlineEnv({ KEEL_HOME: join(root, "home"), KEEL_EXIT_GRACE_MS: "300", ...extra });

describe("strict mode", () => {
  it("without it: exit 0, the warning shown whole (every issue, wrapped, not cut at 160 characters)", async () => {
    const r = await runKeel(["run", "bonjour"], { cwd: root, env: env() });
    expect(r.code, r.stderr).toBe(0);
    // One helper makes every count agree with its noun ("1 rounds" was printed).
    expect(r.stderr).toContain("keel: completed (end_turn) · 1 round · 0 tool calls ·");
    const at = r.stderr.indexOf("KEEL_CONTRIBUTION_INVALID");
    expect(at).toBeGreaterThan(-1);
    const warning = r.stderr.slice(at, r.stderr.indexOf("\nkeel: completed", at));
    expect(warning.replace(/\s+/g, " ").length).toBeGreaterThan(200);
    for (const path of ["invalid at id", "and at sectionId", "and at domain"])
      expect(warning.replace(/\n\s+/g, " ")).toContain(path);
    expect(warning).not.toContain("more chars"); // nothing dropped
    for (const line of warning.split("\n")) expect([...line].length).toBeLessThanOrEqual(100);
  });

  it("--strict: exit 1 with KEEL_STRICT_FAILED naming the plugin and the phase", async () => {
    const r = await runKeel(["run", "--strict", "bonjour"], { cwd: root, env: env() });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("KEEL_STRICT_FAILED");
    expect(r.stderr).toContain("1 plugin problem during the command");
    const failure = r.stderr.slice(r.stderr.indexOf("KEEL_STRICT_FAILED")).replace(/\n\s+/g, " ");
    expect(failure).toContain(
      '1. KEEL_CONTRIBUTION_INVALID (plugin "acme-house-rules-for-the-support-desk-agent", phase "turn.pre_prompt_compile")',
    );
    expect(r.stdout.length).toBeGreaterThan(0); // the answer itself still came
  });

  it("KEEL_STRICT=1 does the same; KEEL_STRICT=0 does not", async () => {
    const on = await runKeel(["run", "bonjour"], { cwd: root, env: env({ KEEL_STRICT: "1" }) });
    expect(on.code, on.stderr).toBe(1);
    expect(on.stderr).toContain("KEEL_STRICT_FAILED");
    const off = await runKeel(["run", "bonjour"], { cwd: root, env: env({ KEEL_STRICT: "0" }) });
    expect(off.code, off.stderr).toBe(0);
    expect(off.stderr).not.toContain("KEEL_STRICT_FAILED");
  });

  it("a clean plugin passes strict mode", async () => {
    const dir = mkdtempSync(join(root, "clean-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default { name: "clean", plugins: [{ name: "fine", version: "1.0.0", setup(ctx) { ctx.on("turn.pre_prompt_compile", () => ({ kind: "prompt_section", id: "fr", sectionId: "lang", domain: "style", content: "Answer in French." })); } }] };\n`,
    );
    const r = await runKeel(["run", "--strict", "bonjour"], { cwd: dir, env: env() });
    expect(r.code, r.stderr).toBe(0);
  });

  it("a mistyped command or plugin package gets a suggestion", async () => {
    const r = await runKeel(["rnu", "hello"], { cwd: root, env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Did you mean "run"?');
    const dir = mkdtempSync(join(root, "typo-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default { name: "typo", plugins: ["@keel/plugin-memroy"] };\n`,
    );
    const p = await runKeel(["inspect"], { cwd: dir, env: env() });
    expect(p.code).toBe(2);
    expect(p.stderr).toContain("KEEL_PLUGIN_NOT_FOUND");
    expect(p.stderr).toContain('Did you mean "@keel/plugin-memory"?');
  });
});
