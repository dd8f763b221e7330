import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const readme = readFileSync(join(root, "README.md"), "utf8");
const ci = readFileSync(join(root, ".ci/run"), "utf8");

describe("README quick start", () => {
  const section = readme.split(/^## Quick start$/m)[1]?.split(/^## /m)[0] ?? "";
  const commands = [...section.matchAll(/^(npx .+)$/gm)].map((m) => m[1]!);

  it("has exactly two commands: run the example, run the tests", () => {
    expect(commands).toHaveLength(2);
    expect(commands[0]).toMatch(/pnpm start"$/);
    expect(commands[1]).toMatch(/pnpm test"$/);
  });

  it("is what CI runs", () => {
    expect(ci.split("\n")).toContain(commands[1]);
  });

  it("pins the same pnpm as package.json", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { packageManager: string };
    for (const c of commands) expect(c).toContain(`-p ${pkg.packageManager}`);
  });
});
