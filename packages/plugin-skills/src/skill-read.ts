/** The `skill_read` tool: a skill's body, or a file inside the skill's folder, never outside it. */
import { readFileSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, win32 } from "node:path";
import { z } from "zod";
import type { ToolDefinition } from "@keel/kernel";
import type { SkillCatalog } from "./catalog.ts";
import { isInside, visibleIn } from "./catalog.ts";
import { codePointLength, headOf, toWellFormed, truncate } from "@keel/text";
import { closestSkills } from "./closest.ts";

/** Largest file `skill_read` returns whole; longer files are cut with a marker. */
export const MAX_READ_CHARS = 64_000;

const Args = z.object({
  name: z
    .string()
    .min(1)
    .describe(
      "The skill's name, as listed under Skills. A name not loaded (or a few words of the task) returns the closest skills.",
    ),
  path: z
    .string()
    .optional()
    .describe("A file path relative to the skill's folder (e.g. reference.md). Omit to read the skill's instructions."),
});

/** What `readSkill` returns. */
export type ReadResult = { ok: true; text: string } | { ok: false; error: string };

/**
 * Read a skill's body, or `path` relative to its folder.
 * Contract: never throws; refuses absolute paths, `..` segments and anything whose real path
 * (symlinks resolved) is outside the skill's folder; with `namespace`, an unreviewed draft
 * of another namespace does not exist (nor is it named in the list of skills).
 */
export function readSkill(catalog: SkillCatalog, name: string, path?: string, namespace?: string): ReadResult {
  const found = catalog.get(name);
  const skill = found && (namespace === undefined || visibleIn(found, namespace)) ? found : undefined;
  if (!skill) {
    const visible = catalog.skills.filter((s) => namespace === undefined || visibleIn(s, namespace));
    const near = closestSkills(visible, name, 8);
    const list = near.map((s) => `- ${s.name}: ${truncate(s.description, 160)}`).join("\n");
    const head = `No skill named "${headOf(name, 80)}" (${visible.length} skills loaded).`;
    return {
      ok: false,
      error: near.length
        ? `${head} Closest matches:\n${list}\nCall skill_read with one of these names, or with other words of the task to search again.`
        : `${head} None is close; call skill_read with other words of the task to search.`,
    };
  }
  if (path === undefined || path === "" || path === "SKILL.md")
    return { ok: true, text: cap(`# Skill: ${skill.name}\n\n${skill.body}`) };
  if (isAbsolute(path) || win32.isAbsolute(path) || path.includes("\0"))
    return { ok: false, error: `"${path}" is absolute; give a path relative to the skill's folder.` };
  if (path.split(/[\\/]+/).some((seg) => seg === ".."))
    return { ok: false, error: `"${path}" leaves the skill's folder ("..")); give a path inside it.` };
  let real: string;
  try {
    real = realpathSync(join(skill.dir, path));
  } catch {
    return { ok: false, error: `"${path}" does not exist in skill "${name}".` };
  }
  if (!isInside(skill.dir, real))
    return {
      ok: false,
      error: `"${path}" resolves outside the skill's folder (a link); only files inside it can be read.`,
    };
  try {
    if (!statSync(real).isFile()) return { ok: false, error: `"${path}" is not a file.` };
    return { ok: true, text: cap(readFileSync(real, "utf8")) };
  } catch (err) {
    return { ok: false, error: `"${path}" cannot be read: ${(err as Error).message}` };
  }
}

function cap(text: string): string {
  const n = codePointLength(text);
  return n <= MAX_READ_CHARS
    ? toWellFormed(text)
    : `${headOf(text, MAX_READ_CHARS)}\n… [${n - MAX_READ_CHARS} more chars cut]`;
}

/** The tool the model calls to read a skill, bound to the turn's namespace. Contract: faults come back as error results, never throws. */
export function skillReadTool(catalog: () => SkillCatalog, namespace?: string): ToolDefinition<z.infer<typeof Args>> {
  return {
    name: "skill_read",
    description:
      "Read a skill's instructions (name only) or a file the skill references (name + path relative to the skill's folder). An unknown name (or a few words of the task) returns the closest skills.",
    input: Args,
    category: "info",
    execute(args) {
      const r = readSkill(catalog(), args.name, args.path, namespace);
      return r.ok ? r.text : { content: r.error, isError: true };
    },
  };
}
