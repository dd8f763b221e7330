import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scriptedProvider } from "@keel/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { draftDir, parseSkillFile, removeDraft, sanitizeSignature, taskSignature, writeDraft } from "../src/index.ts";
import type { Streak } from "../src/index.ts";

const temps: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), "keel-skills-draft-"));
  temps.push(d);
  return d;
};
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

const streak = (signature: string): Streak => ({
  signature,
  namespace: "default",
  count: 3,
  examples: [1, 2, 3].map((i) => ({
    input: `convert the csv invoice number ${i}`,
    answer: `Converted invoice ${i}.`,
    skill: "ledger",
  })),
});

describe("task-signature bucketer", () => {
  it("lowercases, drops stopwords and short tokens, dedupes, keeps the 3 longest, sorts and joins with -", () => {
    expect(taskSignature("Please convert the CSV invoices to JSON, the invoices!")).toBe("convert-invoices-json");
    expect(taskSignature("Convert invoices to JSON please")).toBe("convert-invoices-json");
    expect(taskSignature("a I to of")).toBe("");
    expect(taskSignature("deploy deploy deploy")).toBe("deploy");
    expect(taskSignature("../../etc/passwd; rm -rf /")).toBe("etc-passwd-rm");
  });

  it("sanitises and never resolves a signature outside the auto folder", () => {
    const auto = temp();
    expect(sanitizeSignature("../../Etc/..")).toBe("etc");
    expect(draftDir(auto, "convert-invoices-json")).toBe(join(auto, "convert-invoices-json"));
    for (const bad of ["..", ".", "", "/", "../", "../..", "///"]) expect(draftDir(auto, bad), bad).toBeUndefined();
    for (const odd of ["../../etc/passwd", "/abs/path", "a/b/c", "..\\..\\win"]) {
      const dir = draftDir(auto, odd)!;
      expect(dir.startsWith(`${auto}/`), odd).toBe(true);
      expect(dir.slice(auto.length + 1)).not.toMatch(/[/\\]|\.\./);
    }
  });
});

describe("drafter", () => {
  it("writes SKILL.md and manifest.json atomically from the template when no model is given", async () => {
    const auto = join(temp(), "skills", "auto");
    const out = await writeDraft({ autoDir: auto, streak: streak("convert-invoice-csv"), isRevoked: () => false });
    expect(out).toMatchObject({ status: "drafted", source: "template", dir: join(auto, "convert-invoice-csv") });
    const dir = join(auto, "convert-invoice-csv");
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    expect(manifest).toMatchObject({
      auto_drafted: true,
      signature: "convert-invoice-csv",
      evidence_count: 3,
      needs_review: true,
      score: null,
      source: "template",
      skills_used: ["ledger"],
    });
    const parsed = parseSkillFile(readFileSync(join(dir, "SKILL.md"), "utf8"));
    expect(parsed).toMatchObject({ ok: true, name: "auto-convert-invoice-csv" });
    if (parsed.ok) expect(parsed.body).toContain("convert the csv invoice number 3");
    expect(readdirSync(auto)).toEqual(["convert-invoice-csv"]);
  });

  it("uses the model's body when a model answers, the template when it fails", async () => {
    const auto = temp();
    const model = scriptedProvider([
      { text: "## When to use\n\nConverting invoices.\n\n## Steps\n\n1. Parse the CSV." },
    ]);
    const good = await writeDraft({ autoDir: auto, streak: streak("model-body-sig"), isRevoked: () => false, model });
    expect(good).toMatchObject({ status: "drafted", source: "model" });
    expect(readFileSync(join(auto, "model-body-sig", "SKILL.md"), "utf8")).toContain("1. Parse the CSV.");
    expect(model.requests[0]!.messages[0]!.content[0]).toMatchObject({
      text: expect.stringContaining("convert the csv invoice number 1"),
    });

    const broken = scriptedProvider([{ error: { class: "overloaded" } }]);
    const fallback = await writeDraft({
      autoDir: auto,
      streak: streak("fallback-sig"),
      isRevoked: () => false,
      model: broken,
    });
    expect(fallback).toMatchObject({ status: "drafted", source: "template" });
  });

  it("never drafts a revoked signature, never overwrites, and never writes outside the folder", async () => {
    const base = temp();
    const auto = join(base, "auto");
    expect(await writeDraft({ autoDir: auto, streak: streak("gone-sig"), isRevoked: (s) => s === "gone-sig" })).toEqual(
      { status: "skipped", reason: "revoked" },
    );
    expect(existsSync(join(auto, "gone-sig"))).toBe(false);
    await writeDraft({ autoDir: auto, streak: streak("kept-sig"), isRevoked: () => false });
    expect(await writeDraft({ autoDir: auto, streak: streak("kept-sig"), isRevoked: () => false })).toEqual({
      status: "skipped",
      reason: "exists",
    });
    expect(await writeDraft({ autoDir: auto, streak: streak("../.."), isRevoked: () => false })).toEqual({
      status: "skipped",
      reason: "unsafe_signature",
    });
    const escaped = await writeDraft({ autoDir: auto, streak: streak("../../escape"), isRevoked: () => false });
    expect(escaped).toMatchObject({ status: "drafted", dir: join(auto, "escape") });
    expect(readdirSync(base)).toEqual(["auto"]);
    expect(removeDraft(auto, "kept-sig")).toBe(true);
    expect(removeDraft(auto, "../..")).toBe(false);
    expect(existsSync(auto)).toBe(true);
    expect(readdirSync(auto).sort()).toEqual(["escape"]);
  });
});
