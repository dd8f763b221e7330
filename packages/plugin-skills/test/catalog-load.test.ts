import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { codePointLength, toWellFormed } from "@keel/text";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_DESCRIPTION_CHARS, normalizeSkillName, readSkill, SkillCatalog } from "../src/index.ts";

const temps: string[] = [];
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});
function root(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-skills-load-"));
  temps.push(d);
  return d;
}
function write(dir: string, folder: string, name: string, description: string): string {
  mkdirSync(join(dir, folder), { recursive: true });
  const file = join(dir, folder, "SKILL.md");
  writeFileSync(file, `---\nname: ${name}\ndescription: ${JSON.stringify(description)}\n---\n\nBody of ${folder}.\n`);
  return file;
}

describe("real catalogs load whole", () => {
  it("normalises names with spaces and capitals to kebab-case with a located warning, and keeps the first of two that normalise alike", () => {
    const dir = root();
    const pdf = write(dir, "a-pdf", "PDF Form Filler", "Fill PDF forms.");
    write(dir, "b-pdf", "pdf-form-filler", "Another filler.");
    write(dir, "c-odd", "  Résumé  Writer!! ", "Write résumés.");
    write(dir, "d-ok", "plain-name", "Already fine.");
    const catalog = new SkillCatalog([{ dir }]);
    catalog.refresh();
    expect(catalog.skills.map((s) => s.name)).toEqual(["pdf-form-filler", "resume-writer", "plain-name"]);
    expect(catalog.get("pdf-form-filler")!.file).toBe(pdf);
    const diags = catalog.diagnostics.map((d) => ({
      code: d.code,
      folder: d.file.split("/").at(-2),
      line: d.line,
      loaded: d.loaded === true,
    }));
    expect(diags).toEqual([
      { code: "KEEL_SKILL_NAME_NORMALIZED", folder: "a-pdf", line: 2, loaded: true },
      { code: "KEEL_SKILL_DUPLICATE", folder: "b-pdf", line: 2, loaded: false },
      { code: "KEEL_SKILL_NAME_NORMALIZED", folder: "c-odd", line: 2, loaded: true },
    ]);
    expect(catalog.diagnostics[0]!.message).toContain("Set `name: pdf-form-filler`");
    expect(normalizeSkillName("日本語")).toBe("");
  });

  it(`cuts a description over ${MAX_DESCRIPTION_CHARS} characters by code points, with a warning`, () => {
    const dir = root();
    const long = "🧾 invoices ".repeat(175); // 1,925 code points, 2,100 UTF-16 units
    write(dir, "long", "long-one", long);
    const catalog = new SkillCatalog([{ dir }]);
    catalog.refresh();
    const d = catalog.get("long-one")!.description;
    expect(codePointLength(d)).toBe(MAX_DESCRIPTION_CHARS);
    expect(d.endsWith("…")).toBe(true);
    expect(toWellFormed(d)).toBe(d);
    expect(catalog.diagnostics).toMatchObject([
      {
        code: "KEEL_SKILL_DESCRIPTION_CUT",
        line: 3,
        loaded: true,
        message: expect.stringContaining(`cut to ${MAX_DESCRIPTION_CHARS}`),
      },
    ]);
  });
});

describe("skill_read on an unknown name", () => {
  it("answers with the closest skills by name similarity and by BM25 over descriptions, not the first names", () => {
    const dir = root();
    for (let i = 0; i < 60; i++)
      write(dir, `filler-${String(i).padStart(2, "0")}`, `filler-${i}`, `Filler skill number ${i} about gardening.`);
    write(dir, "zz-invoice", "invoice-reconciler", "Reconcile supplier invoices against purchase orders.");
    write(dir, "zz-travel", "trip-planner", "Plan trips, flights and hotel bookings.");
    const catalog = new SkillCatalog([{ dir }]);
    catalog.refresh();
    const byName = readSkill(catalog, "invoice-reconcilor");
    expect(byName.ok).toBe(false);
    if (!byName.ok)
      expect(byName.error.split("\n")[1]).toBe(
        "- invoice-reconciler: Reconcile supplier invoices against purchase orders.",
      );
    const byWords = readSkill(catalog, "book a hotel for my flight");
    if (!byWords.ok) {
      expect(byWords.error.split("\n")[1]).toMatch(/^- trip-planner:/);
      expect(byWords.error).not.toContain("filler-0:");
    } else expect.unreachable("an unknown name must not read a skill");
  });
});
