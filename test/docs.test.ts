import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { errorsDoc, phasesDoc } from "../scripts/gen-docs.ts";

const docs = join(dirname(fileURLToPath(import.meta.url)), "..", "docs");

describe("generated docs", () => {
  it("docs/phases.md matches the phase table (run `node scripts/gen-docs.ts`)", () => {
    expect(readFileSync(join(docs, "phases.md"), "utf8")).toBe(phasesDoc());
  });
  it("docs/errors.md matches the error table (run `node scripts/gen-docs.ts`)", () => {
    expect(readFileSync(join(docs, "errors.md"), "utf8")).toBe(errorsDoc());
  });
});
