/**
 * Keel outside this repository, the way the README's "Outside this repository" section says:
 * pack every package, `keel init` in an empty folder under the system's temp folder, run at once
 * (offline, before any install), install from the tarballs with real npm, run again with the
 * installed packages. One packing and one install are shared: later scenarios (a model turn
 * through @keel/ai-sdk, `keel serve --mcp` or `--a2a` called by a client) go in this file as
 * further `it`s on `project` (project.startKeel starts a server), after the install test.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishable } from "../../scripts/pack.ts";
import { type OutsideProject, outsideProject, packInto, REPO, type Ran } from "./support/outside.ts";

const root = mkdtempSync(join(tmpdir(), "keel-outside-"));
let packed: { ran: Ran; tarballs: string[] };
let project: OutsideProject;
let installed: Ran | undefined;

beforeAll(async () => {
  packed = await packInto(join(root, "packs"));
  mkdirSync(join(root, "my-agent"));
  project = outsideProject(join(root, "my-agent"));
}, 240_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every package.json under node_modules named `name` (nested copies included). */
function copiesOf(modules: string, name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const at = join(dir, entry);
      if (entry.startsWith("@")) walk(at);
      else if (existsSync(join(at, "package.json"))) {
        if (JSON.parse(readFileSync(join(at, "package.json"), "utf8")).name === name) found.push(at);
        if (existsSync(join(at, "node_modules"))) walk(join(at, "node_modules"));
      }
    }
  };
  walk(modules);
  return found;
}

describe("outside this repository", () => {
  it("pnpm pack:all makes one checked tarball per publishable package, none for private ones", () => {
    expect(packed.ran.code, packed.ran.stdout + packed.ran.stderr).toBe(0);
    expect(packed.ran.stdout).toMatch(/\d+ tarballs, checked/);
    const names = publishable().map((p) => p.name);
    expect(names).toContain("@keel/testkit");
    expect(names).not.toContain("@keel/wire-server");
    expect(packed.tarballs.map((t) => relative(join(root, "packs"), t)).sort()).toEqual(
      publishable()
        .map((p) => `${p.name.slice(1).replace("/", "-")}-${p.version}.tgz`)
        .sort(),
    );
  });

  it('the README\'s "Outside this repository" section shows the commands this file runs', () => {
    const readme = readFileSync(join(REPO, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Outside this repository"));
    for (const line of [
      "pnpm pack:all",
      "node $KEEL/packages/cli/bin/keel.js init",
      "node $KEEL/packages/cli/bin/keel.js run hello",
      "npm install --no-save $KEEL/packs/*.tgz",
      "npx keel run hello",
    ])
      expect(section).toContain(line);
  });

  it("keel init in an empty folder, then keel run hello at once: offline, before any install", async () => {
    const init = await project.checkoutKeel(["init"]);
    expect(init.code, init.stderr).toBe(0);
    expect(existsSync(join(project.dir, "node_modules"))).toBe(false);
    const run = await project.checkoutKeel(["run", "hello"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("hello");
    expect(run.stderr).toContain("offline");
    expect(existsSync(join(project.dir, ".keel", "memory.sqlite"))).toBe(true);
  });

  it("installs from the tarballs with npm, every @keel package from them, one kernel, package.json unchanged", async () => {
    expect(packed.tarballs.length).toBeGreaterThan(3);
    const manifest = readFileSync(join(project.dir, "package.json"), "utf8");
    installed = await project.installFrom(packed.tarballs);
    expect(installed.code, installed.stdout + installed.stderr).toBe(0);
    // The generated package.json keeps registry ranges: the day the packages are published, `npm install` alone works.
    expect(readFileSync(join(project.dir, "package.json"), "utf8")).toBe(manifest);
    expect(JSON.parse(manifest).dependencies["@keel/cli"]).toMatch(/^\^\d/);
    const modules = join(project.dir, "node_modules");
    const lock = JSON.parse(readFileSync(join(modules, ".package-lock.json"), "utf8")) as {
      packages: Record<string, { resolved?: string }>;
    };
    const keel = Object.entries(lock.packages).filter(([at]) => /node_modules\/@keel\//.test(at));
    expect(keel.length).toBeGreaterThanOrEqual(packed.tarballs.length);
    for (const [at, entry] of keel) expect(entry.resolved, at).toMatch(/^file:/);
    expect(copiesOf(modules, "@keel/kernel")).toEqual([join(modules, "@keel", "kernel")]);
    // Real copies, not links back into this repository.
    expect(lstatSync(join(modules, "@keel", "cli")).isSymbolicLink()).toBe(false);
  }, 180_000);

  it("after the install, npx keel run hello works offline with the installed packages", async () => {
    expect(installed?.code).toBe(0);
    const bin = realpathSync(join(project.dir, "node_modules", ".bin", "keel"));
    expect(bin.startsWith(realpathSync(project.dir))).toBe(true);
    expect(bin.startsWith(REPO)).toBe(false);
    const run = await project.npxKeel(["run", "hello"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("You said: hello");
    const inspect = await project.npxKeel(["inspect"]);
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stdout).toContain(join(project.dir, "agent.config.ts"));
    expect(inspect.stdout).toMatch(/@keel\/plugin-memory@\d/);
    expect(inspect.stdout).toMatch(/@keel\/plugin-skills@\d/);
  });
});
