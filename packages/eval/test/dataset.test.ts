import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isKeelError } from "@keel/kernel";
import { datasetHash, loadDataset, parseDataset } from "../src/dataset.ts";
import type { DatasetIssue } from "../src/dataset.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-eval-dataset-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function issues(text: string, file: string): DatasetIssue[] {
  try {
    parseDataset(text, file);
  } catch (err) {
    if (!isKeelError(err, "KEEL_EVAL_DATASET_INVALID")) throw err;
    return err.details as DatasetIssue[];
  }
  throw new Error("expected the dataset to be refused");
}

describe("datasets", () => {
  it("reads JSONL: ids default to the line, numbers become strings, blank lines are skipped", () => {
    const d = parseDataset(
      [
        '{"input": "hi", "expect": {"contains": "hello"}}',
        "",
        '{"id": 7, "input": ["one", "two"], "reference": "r", "metadata": {"tag": "x"}}',
      ].join("\n"),
      "cases.jsonl",
    );
    expect(d.cases.map((c) => c.id)).toEqual(["1", "7"]);
    expect(d.cases[1]).toMatchObject({ input: ["one", "two"], reference: "r", metadata: { tag: "x" } });
    expect(d.cases[1]!.source).toEqual({ file: "cases.jsonl", line: 3 });
    expect(d.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("reads YAML (a list, or `cases:`) with each case's line", () => {
    const text = [
      "cases:",
      "  - id: a",
      "    input: hello",
      "  - id: b",
      "    input:",
      "      - first",
      "      - second",
    ].join("\n");
    const d = parseDataset(text, "cases.yaml");
    expect(d.cases.map((c) => [c.id, c.source?.line])).toEqual([
      ["a", 2],
      ["b", 4],
    ]);
    expect(parseDataset("- input: x\n", "c.yml").cases[0]!.id).toBe("1");
  });

  it("the hash follows the cases, not where they are written", () => {
    const a = parseDataset('{"id":"a","input":"x"}\n', "a.jsonl");
    const b = parseDataset("- id: a\n  input: x\n", "b.yaml");
    expect(a.hash).toBe(b.hash);
    expect(datasetHash([{ id: "a", input: "y" }])).not.toBe(a.hash);
  });

  it("every problem is reported at once, each at its file, line and field", () => {
    const text = [
      '{"id": "ok", "input": "fine"}',
      '{"id": "no-input", "expect": {"contains": "x"}}',
      '{"id": "typo", "input": "x", "expect": {"contians": "x"}}',
      '{"id": "re", "input": "x", "expect": {"regex": "(unclosed"}}',
      '{"id": "schema", "input": "x", "expect": {"jsonSchema": {"type": "no-such-type"}}}',
      '{"id": "ok", "input": "again"}',
      "{not json",
      '{"id": "top", "input": "x", "expected": {}}',
      '{"id": "tool", "input": "x", "expect": {"toolCalled": {"args": {}}}}',
    ].join("\n");
    const found = issues(text, "bad.jsonl");
    const at = (line: number) => found.filter((i) => i.line === line);
    expect(at(2)[0]).toMatchObject({ field: "input", message: expect.stringContaining("every case needs an input") });
    expect(at(3)[0]).toMatchObject({ field: "expect", message: expect.stringContaining('unknown key "contians"') });
    expect(at(3)[0]!.message).toContain("contains");
    expect(at(4)[0]).toMatchObject({ field: "expect.regex", message: expect.stringContaining("regular expression") });
    expect(at(5)[0]).toMatchObject({ field: "expect.jsonSchema", message: expect.stringContaining("JSON Schema") });
    expect(at(6)[0]).toMatchObject({ field: "id", message: expect.stringContaining("first at line 1") });
    expect(at(7)[0]).toMatchObject({ field: "(case)", message: expect.stringContaining("not JSON") });
    expect(at(8)[0]).toMatchObject({ field: "(case)", message: expect.stringContaining('unknown key "expected"') });
    expect(at(9)[0]!.field).toMatch(/^expect\.toolCalled/);
    expect(at(1)).toEqual([]);
  });

  it("the error message names file:line and field, under one code, and says what to do", () => {
    writeFileSync(join(dir, "one.yaml"), ["- id: a", "  input: x", "  expect:", "    regex: '[z-a]'"].join("\n"));
    try {
      loadDataset(join(dir, "one.yaml"));
      expect.unreachable();
    } catch (err) {
      expect(isKeelError(err, "KEEL_EVAL_DATASET_INVALID")).toBe(true);
      const m = (err as Error).message;
      expect(m).toContain(`${join(dir, "one.yaml")}:4 expect.regex`);
      expect(m).toContain("no case was run");
      expect(m).toContain("Fix the field at the file and line shown");
    }
  });

  it("YAML problems point at the field's own line", () => {
    const found = issues(
      ["- id: a", "  input: x", "  expect:", "    contains: 3", "    bogus: 1"].join("\n"),
      "c.yaml",
    );
    expect(found).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ line: 4, field: "expect.contains" }),
        expect.objectContaining({ field: "expect", message: expect.stringContaining('unknown key "bogus"') }),
      ]),
    );
    expect(issues("- id: a\n  input: [x\n", "broken.yaml")[0]).toMatchObject({ field: "(yaml)" });
    expect(issues("name: x\n", "map.yaml")[0]!.message).toContain("cases");
  });

  it("an empty dataset, an unknown extension and a missing file are refused", () => {
    expect(issues("\n\n", "e.jsonl")[0]!.message).toContain("no case");
    expect(issues("{}", "e.csv")[0]!.message).toContain("unknown format");
    expect(() => loadDataset(join(dir, "missing.jsonl"))).toThrow(/cannot be read/);
    expect(() => loadDataset(dir)).toThrow(/cannot be read/);
  });
});
