/**
 * Datasets: cases in JSONL (one JSON object a line) or YAML (a list of cases, or `cases:`).
 * Every case is validated before anything runs; every problem found is reported at once, each
 * at its file, line and field, under one code (KEEL_EVAL_DATASET_INVALID).
 */
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { extname } from "node:path";
import { createRequire } from "node:module";
import type { Ajv } from "ajv";
import type { Node as YamlNode } from "yaml";
import { z } from "zod";
import { canonicalJson, KeelError } from "@keel/kernel";
import { didYouMean, headOf, isWellFormed } from "@keel/text";
import type { EvalCase } from "./types.ts";

/** The keys `expect` may hold: one built-in scorer each. Contract: any other key is a located error. */
export const EXPECT_KEYS = [
  "exact",
  "contains",
  "notContains",
  "regex",
  "jsonSchema",
  "toolCalled",
  "limits",
  "judge",
] as const;

const texts = z.union([z.string(), z.array(z.string()).min(1)]);
const toolCall = z.union([
  z.string().min(1),
  z.strictObject({ name: z.string().min(1), args: z.record(z.string(), z.unknown()).optional() }),
]);
const limit = z.number().nonnegative();

/** Zod schema of `expect`. Contract: strict (an unknown key fails); regexes and JSON schemas are checked by `checkExpect`. */
export const ExpectSchema = z.strictObject({
  exact: z.string().optional(),
  contains: texts.optional(),
  notContains: texts.optional(),
  regex: z
    .union([z.string().min(1), z.strictObject({ pattern: z.string().min(1), flags: z.string().optional() })])
    .optional(),
  jsonSchema: z.union([z.record(z.string(), z.unknown()), z.boolean()]).optional(),
  toolCalled: z.union([toolCall, z.array(toolCall).min(1)]).optional(),
  limits: z
    .strictObject({
      maxRounds: limit.optional(),
      maxToolCalls: limit.optional(),
      maxTokens: limit.optional(),
      maxCostUsd: limit.optional(),
      maxDurationMs: limit.optional(),
    })
    .optional(),
  judge: z
    .union([
      z.string().min(1),
      z.strictObject({ rubric: z.string().min(1), threshold: z.number().min(0).max(1).optional() }),
    ])
    .optional(),
});

/** What `expect` holds once validated. */
export type Expectations = z.infer<typeof ExpectSchema>;

const fixture = z.strictObject({
  args: z.record(z.string(), z.unknown()).optional(),
  result: z.json(),
  isError: z.boolean().optional(),
});

/** Zod schema of a case's `tools`: per tool name, a fixture or a list of them (see tools.ts). Contract: strict. */
export const ToolFixturesSchema = z.record(
  z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "a tool name"),
  z.union([fixture, z.array(fixture).min(1)]),
);

/** Zod schema of one case as written in a dataset. Contract: strict; `id` may be a number (kept as its string). */
export const CaseSchema = z.strictObject({
  id: z.union([z.string().min(1), z.number()]).optional(),
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  metadata: z.record(z.string(), z.unknown()).optional(),
  expect: ExpectSchema.optional(),
  reference: z.string().optional(),
  tools: ToolFixturesSchema.optional(),
});

/** A loaded dataset. Contract: `hash` changes exactly when a case's id, input, metadata, expect, reference or tools does. */
export interface Dataset {
  file: string;
  cases: EvalCase[];
  hash: string;
}

/** One problem in a dataset. Contract: `line` is 1-based, 0 when the problem is the file itself. */
export interface DatasetIssue {
  file: string;
  line: number;
  /** The field's path in the case, e.g. `expect.regex`; `(case)` for the case as a whole. */
  field: string;
  message: string;
}

/** The regular expression of a `regex` expectation. Contract: throws a SyntaxError for an invalid one. */
export function expectRegex(regex: NonNullable<Expectations["regex"]>): RegExp {
  return typeof regex === "string" ? new RegExp(regex) : new RegExp(regex.pattern, regex.flags ?? "");
}

// Ajv and yaml are loaded on first use: most datasets are JSONL without a schema, and the ~40 ms
// their imports cost is the start-up of every `keel eval` otherwise (see bench/eval-overhead.ts).
const load = createRequire(import.meta.url);
let ajv: Ajv | undefined;
const compiled = new Map<string, ReturnType<Ajv["compile"]>>();

/**
 * A JSON Schema compiled by Ajv (draft-07 and 2019-09 keywords; unknown formats are ignored).
 * Contract: the same schema is compiled once per process; throws for a schema Ajv refuses.
 */
export function compileJsonSchema(schema: Record<string, unknown> | boolean): ReturnType<Ajv["compile"]> {
  const key = canonicalJson(schema);
  const known = compiled.get(key);
  if (known) return known;
  ajv ??= new (load("ajv") as typeof import("ajv")).Ajv({ allErrors: true, strict: false, validateFormats: false });
  const validate = ajv.compile(schema);
  compiled.set(key, validate);
  return validate;
}

/** Problems zod cannot see: regexes that do not compile, schemas Ajv refuses. */
function checkExpect(expect: Expectations): Array<{ field: string; message: string }> {
  const out: Array<{ field: string; message: string }> = [];
  if (expect.regex !== undefined) {
    try {
      expectRegex(expect.regex);
    } catch (err) {
      out.push({ field: "expect.regex", message: `not a valid regular expression: ${(err as Error).message}` });
    }
  }
  if (expect.jsonSchema !== undefined) {
    try {
      compileJsonSchema(expect.jsonSchema);
    } catch (err) {
      out.push({ field: "expect.jsonSchema", message: `not a valid JSON Schema: ${(err as Error).message}` });
    }
  }
  return out;
}

/** A raw case and where it starts, with a way to find the line of a field inside it. */
interface RawCase {
  value: unknown;
  line: number;
  lineOf(path: readonly PropertyKey[]): number;
}

const MAX_BYTES = 256 * 1024 * 1024;

/**
 * Read and validate a dataset (`.jsonl`, `.ndjson`, `.yaml`, `.yml`).
 * Contract: returns every case or throws KEEL_EVAL_DATASET_INVALID listing up to 20 problems
 * (file:line field: message; `details` holds them all as DatasetIssue[]); nothing is run before.
 */
export function loadDataset(file: string): Dataset {
  let text: string;
  try {
    if (!statSync(file).isFile()) throw new Error("not a regular file");
    if (statSync(file).size > MAX_BYTES) throw new Error(`larger than ${MAX_BYTES / 1024 / 1024} MB`);
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw invalid(file, [{ file, line: 0, field: "(file)", message: `cannot be read: ${(err as Error).message}` }]);
  }
  return parseDataset(text, file);
}

/** Validate a dataset given as text; `file` names it in errors and decides the format by extension. */
export function parseDataset(text: string, file: string): Dataset {
  const ext = extname(file).toLowerCase();
  const yaml = ext === ".yaml" || ext === ".yml";
  if (!yaml && ext !== ".jsonl" && ext !== ".ndjson")
    throw invalid(file, [
      { file, line: 0, field: "(file)", message: `unknown format "${ext}": use .jsonl (one case a line) or .yaml` },
    ]);
  const issues: DatasetIssue[] = [];
  const raws = yaml ? yamlCases(text, file, issues) : jsonlCases(text, file, issues);
  const cases: EvalCase[] = [];
  const seen = new Map<string, number>();
  for (const raw of raws) {
    const r = CaseSchema.safeParse(raw.value);
    if (!r.success) {
      for (const issue of r.error.issues) {
        const path = issue.path;
        let message = issue.message;
        if (issue.code === "unrecognized_keys") {
          const known = path.length === 0 ? Object.keys(CaseSchema.shape) : path[0] === "expect" ? EXPECT_KEYS : [];
          message = issue.keys
            .map(
              (k) =>
                `unknown key "${k}"${didYouMean(k, known)}${path.length === 0 || path[0] === "expect" ? ` (known: ${known.join(", ")})` : ""}`,
            )
            .join("; ");
        } else if (path.length === 1 && path[0] === "input" && raw.value && !("input" in (raw.value as object)))
          message = "missing: every case needs an input (a string, or a list of turns)";
        issues.push({ file, line: raw.lineOf(path), field: fieldOf(path), message });
      }
      continue;
    }
    const c = r.data;
    for (const p of c.expect ? checkExpect(c.expect) : [])
      issues.push({ file, line: raw.lineOf(p.field.split(".")), ...p });
    const id = c.id === undefined ? String(raw.line) : String(c.id);
    // Stores keep ids as text: SQLite and PostgreSQL turn a lone surrogate into U+FFFD, PostgreSQL
    // a NUL too, so the stored id would no longer be the dataset's (a resume re-runs the case,
    // a baseline compares it as new + missing).
    if (!isWellFormed(id) || id.includes("\0")) {
      issues.push({
        file,
        line: raw.lineOf(["id"]),
        field: "id",
        message: `holds ${id.includes("\0") ? "a NUL" : "a lone surrogate"}, which experiment stores cannot keep; use plain text`,
      });
      continue;
    }
    const first = seen.get(id);
    if (first !== undefined) {
      issues.push({
        file,
        line: raw.lineOf(["id"]),
        field: "id",
        message: `duplicate id "${headOf(id, 60)}" (first at line ${first}); give each case its own id`,
      });
      continue;
    }
    seen.set(id, raw.line);
    cases.push({
      id,
      input: c.input,
      ...(c.metadata ? { metadata: c.metadata } : {}),
      ...(c.expect ? { expect: c.expect as Record<string, unknown> } : {}),
      ...(c.reference !== undefined ? { reference: c.reference } : {}),
      ...(c.tools ? { tools: c.tools as EvalCase["tools"] & object } : {}),
      source: { file, line: raw.line },
    });
  }
  if (!issues.length && !cases.length)
    issues.push({
      file,
      line: 0,
      field: "(file)",
      message: "holds no case: add one per line (JSONL) or a list (YAML)",
    });
  if (issues.length) throw invalid(file, issues);
  return { file, cases, hash: datasetHash(cases) };
}

/** The hash a resumed run must match. Contract: sha256 over the cases' canonical JSON, source excluded. */
export function datasetHash(cases: readonly EvalCase[]): string {
  const h = createHash("sha256");
  for (const { source: _source, ...c } of cases) h.update(`${canonicalJson(c)}\n`);
  return h.digest("hex");
}

function fieldOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || "(case)";
}

function invalid(file: string, issues: DatasetIssue[]): KeelError {
  const shown = issues.slice(0, 20).map((i) => `  ${i.line ? `${file}:${i.line}` : file} ${i.field}: ${i.message}`);
  const more = issues.length > 20 ? `\n  …and ${issues.length - 20} more` : "";
  return new KeelError(
    "KEEL_EVAL_DATASET_INVALID",
    `${file}: ${issues.length} problem${issues.length === 1 ? "" : "s"}, no case was run:\n${shown.join("\n")}${more}\n`,
    { path: issues[0]!.line ? `${file}:${issues[0]!.line}` : file },
    { details: issues },
  );
}

function jsonlCases(text: string, file: string, issues: DatasetIssue[]): RawCase[] {
  const out: RawCase[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((l, i) => {
    const line = i + 1;
    if (!l.trim()) return;
    try {
      const value: unknown = JSON.parse(i === 0 ? l.replace(/^\uFEFF/, "") : l);
      if (!value || typeof value !== "object" || Array.isArray(value))
        issues.push({ file, line, field: "(case)", message: "a case is a JSON object, one per line" });
      else out.push({ value, line, lineOf: () => line });
    } catch (err) {
      issues.push({ file, line, field: "(case)", message: `not JSON: ${(err as Error).message}` });
    }
  });
  return out;
}

function yamlCases(text: string, file: string, issues: DatasetIssue[]): RawCase[] {
  const { isMap, isSeq, LineCounter, parseDocument } = load("yaml") as typeof import("yaml");
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true });
  const lineAt = (offset: number) => counter.linePos(offset).line;
  if (doc.errors.length) {
    for (const e of doc.errors.slice(0, 20))
      issues.push({ file, line: lineAt(e.pos[0]), field: "(yaml)", message: e.message.split("\n")[0]! });
    return [];
  }
  let seq = doc.contents as YamlNode | null;
  if (isMap(seq)) {
    const keys = seq.items.map((p) => String((p.key as { value?: unknown })?.value ?? p.key));
    if (keys.length !== 1 || keys[0] !== "cases") {
      issues.push({
        file,
        line: lineAt(seq.range?.[0] ?? 0),
        field: "(file)",
        message: "a YAML dataset is a list of cases, or a map with one key `cases` holding the list",
      });
      return [];
    }
    seq = seq.get("cases", true) as YamlNode | null;
  }
  if (!isSeq(seq)) {
    issues.push({
      file,
      line: seq?.range ? lineAt(seq.range[0]) : 1,
      field: "(file)",
      message: "a YAML dataset is a list of cases (`- input: …`)",
    });
    return [];
  }
  const out: RawCase[] = [];
  seq.items.forEach((item) => {
    const node = item as YamlNode;
    const line = node?.range ? lineAt(node.range[0]) : 1;
    // Case by case: aliases are counted per case (yaml refuses more than 100 expansions in one
    // conversion, its guard against alias bombs), and a refused case is an issue at its line.
    let value: unknown;
    try {
      value = node && typeof node === "object" && "toJS" in node ? node.toJS(doc) : (node ?? null);
    } catch (err) {
      issues.push({ file, line, field: "(case)", message: `cannot be read: ${(err as Error).message}` });
      return;
    }
    out.push({
      value: value ?? null,
      line,
      lineOf: (path) => {
        for (let n = path.length; n > 0; n--) {
          const at = isMap(node) ? (node.getIn(path as unknown[], true) as YamlNode | undefined) : undefined;
          if (at && typeof at === "object" && at.range) return lineAt(at.range[0]);
          path = path.slice(0, n - 1);
        }
        return line;
      },
    });
  });
  return out;
}
