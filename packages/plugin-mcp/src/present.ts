import type { JsonSchema } from "@keel/kernel";
import { codePointLength, headOf } from "@keel/text";

/**
 * How a visible MCP tool is written into the request.
 * Contract: `full` cuts the description at `descriptionChars` code points, `compact` at
 * `compactDescriptionChars`; both keep every parameter.
 */
export type ToolForm = "full" | "compact";

/** Limits of the two forms. Contract: positive code-point counts. */
export interface PresentLimits {
  descriptionChars: number;
  compactDescriptionChars: number;
}

/**
 * A tool's description and parameters as sent to the model.
 * Contract: the description's lines are trimmed and blank lines dropped (Python docstrings
 * arrive indented), then cut at a sentence end within the limit when one is past 40% of it,
 * else at the limit, by code points, with "…"; the parameters lose only what repeats their
 * names: a `title` equal (letters and digits, any case) to its property's name or, at the top,
 * to the tool's name with an optional "Arguments"/"Input"/"Params" suffix, and nested
 * `$schema`; nested descriptions are trimmed the same way but never cut; values (`default`,
 * `const`, `enum`, `examples`) are sent as given. The input is not modified.
 */
export function presentTool(
  t: { tool: string; description: string; parameters: JsonSchema },
  form: ToolForm,
  limits: PresentLimits,
): { description: string; parameters: JsonSchema } {
  // A compact form is never longer than the full one, whatever the options say.
  const max =
    form === "compact" ? Math.min(limits.compactDescriptionChars, limits.descriptionChars) : limits.descriptionChars;
  return {
    description: cutAtSentence(tidyText(t.description), max),
    parameters: leanSchema(t.parameters, undefined, t.tool) as JsonSchema,
  };
}

/** Lines trimmed, blank lines dropped. Contract: no other change. */
export function tidyText(text: string): string {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .join("\n");
}

/** At most `max` code points, cut at a sentence end past 40% of `max` when there is one, with "…". */
export function cutAtSentence(text: string, max: number): string {
  if (codePointLength(text) <= max) return text;
  const head = headOf(text, max - 1);
  let end = -1;
  // Matched against the head plus the next character: "v1." of "v1.2" at the cut is no sentence
  // end; CJK full stops need no space after them.
  for (const m of (head + text.charAt(head.length)).matchAll(/[.!?](?=\s|$)|[。！？]/g))
    if (m.index < head.length) end = m.index + m[0].length;
  const sentence = end > 0 && codePointLength(head.slice(0, end)) >= max * 0.4;
  return `${sentence ? head.slice(0, end) : head.trimEnd()}…`;
}

const key = (s: string) => s.toLowerCase().replace(/[^\p{L}\p{N}]/gu, "");
/** Keywords whose values are instances (data), not schemas. */
const DATA = new Set(["default", "const", "enum", "examples"]);
const SUFFIX = /(arguments|args|input|params|parameters|request|schema)$/;

function leanSchema(x: unknown, prop: string | undefined, tool: string | undefined): unknown {
  if (Array.isArray(x)) return x.map((v) => leanSchema(v, undefined, undefined));
  if (typeof x !== "object" || x === null) return x;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x)) {
    // Values, not schemas: sent as given.
    if (DATA.has(k)) {
      out[k] = v;
      continue;
    }
    if (k === "$schema" && tool === undefined) continue;
    if (
      k === "title" &&
      typeof v === "string" &&
      ((prop !== undefined && key(v) === key(prop)) || (tool !== undefined && key(v).replace(SUFFIX, "") === key(tool)))
    )
      continue;
    if (k === "description" && typeof v === "string") out[k] = tidyText(v);
    else if (k === "properties" && typeof v === "object" && v !== null && !Array.isArray(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, leanSchema(s, p, undefined)]));
    else out[k] = leanSchema(v, undefined, undefined);
  }
  return out;
}
