/**
 * secretlint's recommended preset (MIT, @secretlint/secretlint-rule-preset-recommend) driven
 * synchronously: each rule's `file(source)` handler runs against a minimal rule context, so a
 * store can scan inside its write transaction. Rules that need a file path (.npmrc,
 * package.json, .p12) see none and skip those checks; text checks all run.
 */
import { creator as preset } from "@secretlint/secretlint-rule-preset-recommend";
import type { SecretFinding } from "./types.ts";

interface Translated {
  id: string;
  props: Record<string, unknown>;
}
interface RuleContext {
  createTranslator(messages: unknown): (id: string, props?: Record<string, unknown>) => Translated;
  report(d: { message: Translated | string; range: readonly [number, number] }): void;
  ignore(d: unknown): void;
}
interface Source {
  content: string;
  filePath: string;
  ext: string;
  contentType: "text";
  indexToPosition(i: number): { line: number; column: number };
  locationToRange(l: unknown): readonly [number, number];
}
interface RuleCreator {
  meta: { id: string };
  create(ctx: RuleContext, options: Record<string, unknown>): { file?(source: Source): unknown };
}

/** Rules left out: comment directives would let the scanned text switch the scanner off. */
const SKIP = new Set(["@secretlint/secretlint-rule-filter-comments"]);
/** Options per rule: AWS access key ids are reported too (off by default in secretlint). */
const OPTIONS: Record<string, Record<string, unknown>> = {
  "@secretlint/secretlint-rule-aws": { enableIDScanRule: true },
};

const RULES = ((preset as unknown as { rules: RuleCreator[] }).rules ?? []).filter((r) => !SKIP.has(r.meta.id));

/** `AWSSecretAccessKey` → `aws_secret_access_key`; `PostgreSQLConnection` → `postgresql_connection`. */
export function snake(id: string): string {
  return id
    .replace(/PostgreSQL/g, "Postgresql")
    .replace(/MySQL/g, "Mysql")
    .replace(/MongoDB/g, "Mongodb")
    .replace(/GitHub/g, "Github")
    .replace(/GitLab/g, "Gitlab")
    .replace(/OpenAI/g, "Openai")
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .replace(/^_|_$/g, "")
    .toLowerCase();
}

/** The names of the secretlint rules in use. Contract: stable order, `@secretlint/secretlint-rule-` dropped. */
export function secretlintRuleNames(): string[] {
  return RULES.map((r) => r.meta.id.replace("@secretlint/secretlint-rule-", ""));
}

/**
 * Findings of every secretlint rule in `text`.
 * Contract: never throws (a rule that fails is skipped); a finding covers the reported range
 * and every occurrence of the value the rule names, so a rule that reports the label's
 * range still gets its value redacted.
 */
export function secretlintFindings(text: string): SecretFinding[] {
  const out: SecretFinding[] = [];
  const lineStarts = [0];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lineStarts.push(i + 1);
  const source: Source = {
    content: text,
    filePath: "",
    ext: "",
    contentType: "text",
    indexToPosition(i) {
      let line = 0;
      while (line + 1 < lineStarts.length && lineStarts[line + 1]! <= i) line++;
      return { line: line + 1, column: i - lineStarts[line]! };
    },
    locationToRange(l) {
      const loc = l as { start?: { line: number; column: number }; end?: { line: number; column: number } };
      const at = (p: { line: number; column: number } | undefined) =>
        p ? (lineStarts[p.line - 1] ?? 0) + p.column : 0;
      return [at(loc.start), at(loc.end)] as const;
    },
  };
  for (const rule of RULES) {
    const name = rule.meta.id.replace("@secretlint/secretlint-rule-", "");
    const ctx: RuleContext = {
      createTranslator: () => (id, props) => ({ id, props: props ?? {} }),
      report: (d) => {
        const kind = typeof d.message === "string" ? snake(name) : snake(d.message.id);
        const [s, e] = d.range;
        if (Number.isInteger(s) && Number.isInteger(e) && e > s)
          out.push({ kind, rule: `secretlint:${name}`, start: s, end: e });
        if (typeof d.message === "string") return;
        for (const v of Object.values(d.message.props)) {
          if (typeof v !== "string" || v.length < 8) continue;
          for (let i = text.indexOf(v); i >= 0; i = text.indexOf(v, i + v.length))
            out.push({ kind, rule: `secretlint:${name}`, start: i, end: i + v.length });
        }
      },
      ignore: () => {},
    };
    try {
      const r = rule.create(ctx, OPTIONS[rule.meta.id] ?? {}).file?.(source);
      if (r && typeof (r as Promise<unknown>).then === "function") (r as Promise<unknown>).catch(() => {});
    } catch {
      // a rule that fails on odd input is skipped; the other rules and the entropy check still run
    }
  }
  return out;
}
