/**
 * The tarball checks of `pnpm pack:all` find what would break a user's install: a packed
 * package.json with a `workspace:` range, an entry point the tarball lacks, a plugin bringing
 * its own kernel, tests or keys shipped, a `.ts` import or an undeclared dependency in the JS.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importProblems, manifestProblems, secretProblems } from "../scripts/pack-check.ts";
import { publishable } from "../scripts/pack.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-pack-check-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const good = {
  name: "@keel/plugin-x",
  main: "./dist/index.js",
  types: "./dist/index.d.ts",
  exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" } },
  dependencies: { zod: "^4.0.0" },
  peerDependencies: { "@keel/kernel": "^1.0.0" },
};
const files = ["package.json", "dist/index.js", "dist/index.d.ts"];

describe("pack:all's tarball checks", () => {
  it("pass a well-formed plugin and name each problem of a broken one", () => {
    expect(manifestProblems("x.tgz", good, files)).toEqual([]);
    const bad = manifestProblems(
      "x.tgz",
      {
        ...good,
        exports: { ".": { types: "./src/index.ts", default: "./dist/missing.js" } },
        dependencies: { "@keel/kernel": "workspace:*" },
        peerDependencies: {},
      },
      [...files, "test/x.test.ts", "dist/.env", "node_modules/a/index.js"],
    ).join("\n");
    for (const problem of [
      '"workspace:" range',
      "points at ./dist/missing.js",
      "TypeScript sources",
      "holds test/x.test.ts",
      "holds dist/.env",
      "holds node_modules/a/index.js",
      "@keel/kernel is a dependency",
      "without @keel/kernel as a peer",
    ])
      expect(bad).toContain(problem);
  });

  it("find .ts imports, undeclared packages and keys in shipped files", () => {
    mkdirSync(join(dir, "dist"));
    writeFileSync(
      join(dir, "dist/index.js"),
      'import a from "./a.ts";\nimport z from "zod";\nimport p from "pg";\nimport fs from "node:fs";\nconst t = `import v from "vitest"`;\n',
    );
    writeFileSync(join(dir, "README.md"), "key: sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ\n");
    const problems = importProblems("x.tgz", good, dir, files).join("\n");
    expect(problems).toContain("imports ./a.ts");
    expect(problems).toContain("imports pg, which package.json does not declare");
    expect(problems).not.toContain("zod");
    expect(problems).not.toContain("vitest");
    expect(secretProblems("x.tgz", dir, ["README.md"])).toHaveLength(1);
  });

  it("publish every package but the private ones", () => {
    const names = publishable().map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(["@keel/kernel", "@keel/cli", "@keel/testkit"]));
    expect(names).not.toContain("@keel/wire-server");
  });
});
