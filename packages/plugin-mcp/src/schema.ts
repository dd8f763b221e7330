import type { JsonSchema } from "@keel/kernel";

/** Top-level keywords OpenAI rejects (or ignores) on function parameters; Anthropic tolerates their absence. */
const DROPPED_AT_TOP = ["$schema", "$id", "oneOf", "anyOf", "allOf", "not", "enum", "const", "if", "then", "else"];

/**
 * An MCP tool's `inputSchema` in a form both Anthropic and OpenAI accept.
 * Contract: the result has `type: "object"` and an object `properties`; `required` only names
 * existing properties; the top level has no combinators, `enum`, `const` or `$schema`; nested
 * schemas (and `$defs`/`definitions` they reference) are kept as given; the input is not modified;
 * a schema nested deeper than MAX_SCHEMA_DEPTH counts as absent (no parameters declared).
 */
export function normalizeInputSchema(input: unknown): JsonSchema {
  // A hostile nesting would overflow the stack of every later walk (hash, presentation, request).
  const src = isObject(input) && !deeperThan(input, MAX_SCHEMA_DEPTH) ? input : {};
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(src)) if (!DROPPED_AT_TOP.includes(k)) out[k] = v;
  out.type = "object";
  const props = isObject(src.properties) ? { ...src.properties } : {};
  // A top-level union of object shapes: keep the union of their properties (none required).
  for (const key of ["oneOf", "anyOf", "allOf"]) {
    const list = src[key];
    if (!Array.isArray(list)) continue;
    for (const alt of list)
      if (isObject(alt) && isObject(alt.properties))
        for (const [p, s] of Object.entries(alt.properties)) if (!(p in props)) props[p] = s;
  }
  out.properties = props;
  if (Array.isArray(src.required)) {
    const req = src.required.filter((r): r is string => typeof r === "string" && r in props);
    if (req.length) out.required = [...new Set(req)];
    else delete out.required;
  } else delete out.required;
  return out;
}

/** Deepest nesting of objects and arrays an input schema may have (real schemas nest a few levels; recursion goes through `$ref`). */
export const MAX_SCHEMA_DEPTH = 64;

/** True when `v` nests objects or arrays more than `max` deep (walked without recursion). */
function deeperThan(v: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[v, 0]];
  while (stack.length) {
    const [x, depth] = stack.pop()!;
    if (typeof x !== "object" || x === null) continue;
    if (depth >= max) return true;
    for (const c of Object.values(x)) stack.push([c, depth + 1]);
  }
  return false;
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
