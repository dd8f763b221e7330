/**
 * Small pure parts of a turn the loop's steps use: which tools plugins hide, the host's metadata
 * as handlers see it, a tool's schema as the provider gets it, and a structured answer checked.
 */
import * as z from "zod/mini";
import type { Contributed } from "./dispatch.ts";
import { errorMessage } from "./errors.ts";
import type { ContributionRecord } from "./events.ts";
import type { ContributionOf } from "./contributions.ts";
import type { ResolvedTool } from "./merge.ts";
import { freezeDeep } from "./messages.ts";
import { wellFormedDeep } from "./text.ts";
import type { ToolSchema } from "./provider.ts";
import type { Turn, Visibility } from "./turn-state.ts";

/** Which tools the turn's tool_visibility contributions hide, what each plugin hid, and what each did. */
export function applyVisibility(
  items: readonly Contributed<ContributionOf<"tool_visibility">>[],
  tools: ReadonlyMap<string, ResolvedTool>,
): Visibility & { records: ContributionRecord[] } {
  const names = new Set<string>();
  const byPlugin = new Map<string, Set<string>>();
  const records: ContributionRecord[] = [];
  for (const { plugin, value } of items) {
    const keep = new Set(value.keep ?? []);
    const categories = new Set(value.hide.categories ?? []);
    const byName = new Set(value.hide.names ?? []);
    let n = 0;
    for (const t of tools.values()) {
      if (keep.has(t.def.name)) continue;
      if (categories.has(t.def.category ?? "info") || byName.has(t.def.name)) {
        names.add(t.def.name);
        if (!byPlugin.has(plugin)) byPlugin.set(plugin, new Set());
        byPlugin.get(plugin)!.add(t.def.name);
        n++;
      }
    }
    records.push({
      plugin,
      kind: "tool_visibility",
      status: "applied",
      reason: `${value.reason} (${n} tool(s) hidden)`,
    });
  }
  return { names, byPlugin, records };
}

/** The host's metadata as handlers see it: a copy (the event freeze must not freeze the host's objects). */
export function copyMetadata(metadata: Record<string, unknown>): Readonly<Record<string, unknown>> {
  try {
    for (const _ in metadata) return structuredClone(metadata);
    return {};
  } catch {
    return { ...metadata };
  }
}

const schemaCache = new WeakMap<object, ToolSchema>();

/** A tool as the provider is sent it, built once per definition: a frozen, well-formed copy. */
export function toolSchema(t: ResolvedTool): ToolSchema {
  let s = schemaCache.get(t.def);
  if (s) return s;
  let parameters: Record<string, unknown>;
  try {
    parameters =
      t.def.parameters ??
      (t.def.input
        ? (z.toJSONSchema(t.def.input, { io: "input", unrepresentable: "any" }) as Record<string, unknown>)
        : { type: "object", properties: {} });
  } catch {
    // A schema that cannot be described (or whose getters throw) is sent as an open object; its safeParse still checks the call.
    parameters = { type: "object", properties: {} };
  }
  // Sent every round: kept as a frozen, well-formed copy, so the request's repair walk finds it done.
  let own = true;
  try {
    parameters = structuredClone(parameters);
  } catch {
    // A schema holding what cannot be cloned is sent as it is (and walked every round), never frozen: it is the host's object.
    own = false;
  }
  const schema = { name: t.def.name, description: t.def.description, parameters };
  s = wellFormedDeep(own ? freezeDeep(schema) : schema);
  schemaCache.set(t.def, s);
  return s;
}

/** Why `text` is not a valid structured answer, or undefined (then `t.output` holds the value). */
export function checkOutput(t: Turn, text: string): string | undefined {
  const parsed = parseAnswer(text);
  if (!parsed.ok) return parsed.error;
  let checked: ReturnType<NonNullable<Turn["outputSpec"]>["schema"]["safeParse"]>;
  try {
    checked = t.outputSpec!.schema.safeParse(parsed.value);
  } catch (err) {
    return `validating it threw: ${errorMessage(err)}`;
  }
  if (checked.success) {
    t.output = checked.data;
    return undefined;
  }
  return checked.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`)
    .join("; ");
}

/** The answer text as JSON: the whole text, or the body of one fenced block. */
function parseAnswer(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  const t = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(t);
  try {
    return { ok: true, value: JSON.parse(fenced ? fenced[1]! : t) };
  } catch (err) {
    return { ok: false, error: `the answer is not JSON (${errorMessage(err)})` };
  }
}
