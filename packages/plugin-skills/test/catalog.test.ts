import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { findDataDir } from "../../../test/support/data.ts";
import { parseSkillFile, readSkill, SkillCatalog } from "../src/index.ts";

const FIXTURES = fileURLToPath(new URL("./fixtures/catalog", import.meta.url));
const data = findDataDir();
const temps: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), "keel-skills-cat-"));
  temps.push(d);
  return d;
};
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

function skillMd(name: string, description: string, body = "Body."): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n\n${body}\n`;
}

describe("catalog over the real catalogs with malformed fixtures mixed in", () => {
  it.skipIf(!data)(
    "loads the 36 SKILL.md files of anthropic/openai/superpowers, skips the malformed and duplicate ones with located diagnostics",
    () => {
      const root = join(data!, "skills");
      const catalog = new SkillCatalog([{ dir: root }, { dir: FIXTURES }]);
      expect(catalog.refresh()).toBe(true);
      const real = catalog.skills.filter((s) => s.root === root);
      const dupes = catalog.diagnostics.filter((d) => d.code === "KEEL_SKILL_DUPLICATE" && d.file.startsWith(root));
      // 36 SKILL.md files; anthropic and openai both ship "skill-creator", so the second is a located duplicate.
      expect(real.length + dupes.length).toBe(36);
      expect(dupes.map((d) => d.file)).toEqual([join(root, "openai", "skill-creator", "SKILL.md")]);
      expect(new Set(real.map((s) => s.file.split("/").at(-3)))).toEqual(
        new Set(["anthropic", "openai", "superpowers"]),
      );
      for (const s of real) {
        expect(s.name).toMatch(/^[a-z0-9-]+$/);
        expect(s.description.length).toBeGreaterThan(20);
        expect(s.body.length).toBeGreaterThan(50);
      }
      expect(catalog.get("invoice-reconciler")?.root).toBe(FIXTURES);
      const byDir = new Map(
        catalog.diagnostics.filter((d) => d.file.startsWith(FIXTURES)).map((d) => [d.file.split("/").at(-2), d]),
      );
      expect([...byDir.keys()].sort()).toEqual([
        "bad-name",
        "bad-yaml",
        "dup-brainstorming",
        "missing-description",
        "no-frontmatter",
        "unclosed",
      ]);
      expect(byDir.get("bad-yaml")).toMatchObject({
        code: "KEEL_SKILL_INVALID",
        line: 3,
        message: expect.stringContaining("invalid YAML"),
      });
      expect(byDir.get("no-frontmatter")).toMatchObject({
        line: 1,
        message: expect.stringContaining("must start with a `---` line"),
      });
      expect(byDir.get("missing-description")).toMatchObject({ message: expect.stringContaining("add `description:") });
      expect(byDir.get("unclosed")?.message).toContain("never closed");
      expect(byDir.get("bad-name")?.message).toContain("not a valid skill name");
      expect(byDir.get("dup-brainstorming")).toMatchObject({
        code: "KEEL_SKILL_DUPLICATE",
        message: expect.stringContaining("superpowers/brainstorming/SKILL.md"),
      });
      expect(catalog.get("brainstorming")!.file).toContain("superpowers");
    },
  );

  it("parses frontmatter and reports the YAML error's line in the file", () => {
    expect(parseSkillFile(skillMd("a-b", "Does things."))).toMatchObject({
      ok: true,
      name: "a-b",
      description: "Does things.",
      body: "Body.",
    });
    expect(parseSkillFile("---\nname: x\ndescription: ok\nbad: : [\n---\n")).toMatchObject({ ok: false, line: 4 });
    expect(parseSkillFile("---\n- a list\n---\n")).toMatchObject({
      ok: false,
      message: expect.stringContaining("YAML mapping"),
    });
  });

  it("picks up added, changed and removed skills between refreshes, and only rescans cheaply when nothing changed", () => {
    const root = temp();
    mkdirSync(join(root, "one"));
    writeFileSync(join(root, "one", "SKILL.md"), skillMd("one", "First skill."));
    const catalog = new SkillCatalog([{ dir: root }]);
    expect(catalog.refresh()).toBe(true);
    expect(catalog.skills.map((s) => s.name)).toEqual(["one"]);
    const first = catalog.get("one");
    expect(catalog.refresh()).toBe(false);
    expect(catalog.get("one")).toBe(first);

    mkdirSync(join(root, "group", "two"), { recursive: true });
    writeFileSync(join(root, "group", "two", "SKILL.md"), skillMd("two", "Second skill, two levels down."));
    expect(catalog.refresh()).toBe(true);
    expect(catalog.skills.map((s) => s.name)).toEqual(["two", "one"]);
    expect(catalog.get("one")).toBe(first);

    writeFileSync(join(root, "one", "SKILL.md"), skillMd("one", "First skill, edited description."));
    utimesSync(join(root, "one", "SKILL.md"), new Date(), new Date(Date.now() + 5000));
    expect(catalog.refresh()).toBe(true);
    expect(catalog.get("one")!.description).toBe("First skill, edited description.");

    rmSync(join(root, "group"), { recursive: true });
    writeFileSync(join(root, "one", "SKILL.md"), "no frontmatter any more");
    utimesSync(join(root, "one", "SKILL.md"), new Date(), new Date(Date.now() + 10_000));
    expect(catalog.refresh()).toBe(true);
    expect(catalog.skills).toEqual([]);
    expect(catalog.diagnostics).toEqual([
      expect.objectContaining({ code: "KEEL_SKILL_INVALID", file: join(root, "one", "SKILL.md"), line: 1 }),
    ]);
  });

  it("reports an unreadable root as a diagnostic, not a crash; a missing root is simply empty", () => {
    const root = temp();
    writeFileSync(join(root, "file"), "x");
    const catalog = new SkillCatalog([{ dir: join(root, "missing") }, { dir: join(root, "file") }]);
    catalog.refresh();
    expect(catalog.skills).toEqual([]);
    expect(catalog.diagnostics.map((d) => d.code)).toEqual(["KEEL_SKILL_DIR_UNREADABLE"]);
  });
});

describe("skill_read confinement", () => {
  it("returns the body or a referenced file, and refuses .., absolute paths and symlink escapes", () => {
    const root = temp();
    const outside = join(temp(), "secret.txt");
    writeFileSync(outside, "TOP SECRET");
    const dir = join(root, "reader");
    mkdirSync(join(dir, "docs"), { recursive: true });
    writeFileSync(join(dir, "SKILL.md"), skillMd("reader", "Reads files.", "Step one: read docs/ref.md."));
    writeFileSync(join(dir, "docs", "ref.md"), "reference text");
    symlinkSync(outside, join(dir, "docs", "leak.md"));
    symlinkSync(join(dir, "docs", "ref.md"), join(dir, "inner-link.md"));
    const catalog = new SkillCatalog([{ dir: root }]);
    catalog.refresh();

    expect(readSkill(catalog, "reader")).toEqual({
      ok: true,
      text: expect.stringContaining("Step one: read docs/ref.md."),
    });
    expect(readSkill(catalog, "reader", "docs/ref.md")).toEqual({ ok: true, text: "reference text" });
    expect(readSkill(catalog, "reader", "inner-link.md")).toEqual({ ok: true, text: "reference text" });
    for (const bad of [
      "../../etc/passwd",
      "docs/../../x",
      "/etc/passwd",
      outside,
      "docs/leak.md",
      "C:\\Windows\\win.ini",
      "docs",
    ]) {
      const r = readSkill(catalog, "reader", bad);
      expect(r.ok, bad).toBe(false);
      if (!r.ok) expect(r.error).not.toContain("TOP SECRET");
    }
    expect(readSkill(catalog, "raeder")).toMatchObject({
      ok: false,
      error: expect.stringContaining("Closest matches:\n- reader: Reads files."),
    });
    expect(readSkill(catalog, "zzz")).toMatchObject({ ok: false, error: expect.stringContaining("None is close") });
  });
});
