import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { contributionsDoc, errorsDoc, phasesDoc } from "../scripts/gen-docs.ts";
import { CONTRIBUTION_SCHEMAS, validateContribution } from "../packages/kernel/src/index.ts";
import { CONTRIBUTION_DOCS } from "../scripts/reference.ts";

const docs = join(dirname(fileURLToPath(import.meta.url)), "..", "docs");

describe("generated docs", () => {
  it("docs/phases.md matches the phase table (run `node scripts/gen-docs.ts`)", () => {
    expect(readFileSync(join(docs, "phases.md"), "utf8")).toBe(phasesDoc());
  });
  it("docs/errors.md matches the error table (run `node scripts/gen-docs.ts`)", () => {
    expect(readFileSync(join(docs, "errors.md"), "utf8")).toBe(errorsDoc());
  });
  it("docs/contributions.md matches the schemas and reference tables (run `node scripts/gen-docs.ts`)", () => {
    expect(readFileSync(join(docs, "contributions.md"), "utf8")).toBe(contributionsDoc());
  });
  it("every kind's example is a valid contribution, and every schema field is documented", () => {
    for (const [kind, doc] of Object.entries(CONTRIBUTION_DOCS)) {
      const v = validateContribution(doc.example);
      expect(v.ok, `${kind}: ${v.ok ? "" : v.message}`).toBe(true);
      const schema = CONTRIBUTION_SCHEMAS[kind as keyof typeof CONTRIBUTION_SCHEMAS] as unknown as {
        shape?: Record<string, unknown>;
        def?: { in?: { shape?: Record<string, unknown> } };
      };
      const shape = schema.shape ?? schema.def?.in?.shape;
      if (shape)
        expect(Object.keys(doc.fields).sort(), kind).toEqual(
          Object.keys(shape)
            .filter((k) => k !== "kind")
            .sort(),
        );
    }
  });
});
