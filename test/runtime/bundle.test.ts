/**
 * The runtime tests' bundler (support/bundle.ts) refuses Node: a module that imports `node:*`
 * fails the bundle with esbuild's located error (file, line, column, source line), so a Node
 * import that creeps into the agent's code names itself instead of failing later in workerd or
 * a page.
 */
import { describe, expect, it } from "vitest";
import { bundle } from "./support/bundle.ts";

describe("the runtime bundle", () => {
  it("fails on a node: import, naming the module, the importing file and the line", async () => {
    const failure = await bundle(`export { size } from "./fixtures/imports-node.ts";\n`, import.meta.dirname).then(
      () => undefined,
      (err: Error) => err.message,
    );
    expect(failure).toContain('"node:fs" is a Node module');
    expect(failure).toContain("imported by test/runtime/fixtures/imports-node.ts");
    expect(failure).toMatch(/test\/runtime\/fixtures\/imports-node\.ts:2:\d+:/);
    expect(failure).toContain('import { readFileSync } from "node:fs";');
  });

  it("inlines the rest into one ES module with no import left", async () => {
    const code = await bundle(
      `import { z } from "zod";\nexport const n = z.number().parse(42);\n`,
      import.meta.dirname,
    );
    expect(code).not.toMatch(/^\s*import\b/m);
    expect(code).toMatch(/\bexport\s*\{/);
  });
});
