/**
 * The skill catalog: SKILL.md folders (YAML frontmatter `name`, `description`, then Markdown)
 * found one or two levels below each root. Malformed and duplicate skills are skipped with a
 * located diagnostic; a rescan is cheap (directory listings and stats) and only changed files
 * are parsed again.
 */
import { readdirSync, realpathSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { parseDocument } from "yaml";
import { readRegularFile } from "@keel/safe-path";
import { codePointLength, headOf, truncate } from "@keel/text";

/** A loaded skill. Contract: `dir` is the real path of the skill's folder; `name` is unique in a catalog. */
export interface Skill {
  name: string;
  description: string;
  /** The Markdown after the frontmatter. */
  body: string;
  dir: string;
  file: string;
  /** The root it was found under. */
  root: string;
  /** True for a draft under `<KEEL_HOME>/skills/auto/`. */
  auto: boolean;
  /** For a draft: the namespace that produced it (from manifest.json) and whether a person reviewed it. */
  draft?: DraftScope;
  /** The whole frontmatter. */
  frontmatter: Record<string, unknown>;
}

/** Who may see a draft. Contract: an unreviewed draft without a namespace is visible to no namespace. */
export interface DraftScope {
  namespace: string | undefined;
  reviewed: boolean;
}

/** A draft's scope from the manifest.json beside its SKILL.md. Contract: never throws; unreadable means unreviewed and unscoped. */
export function readDraftScope(dir: string): DraftScope {
  try {
    const m = JSON.parse(readRegularFile(join(dir, "manifest.json")).toString("utf8")) as Record<string, unknown>;
    return { namespace: typeof m.namespace === "string" ? m.namespace : undefined, reviewed: m.needs_review === false };
  } catch {
    return { namespace: undefined, reviewed: false };
  }
}

/** True when `skill` may be listed or read in `namespace`: not a draft, a reviewed one, or one this namespace produced. */
export function visibleIn(skill: Skill, namespace: string): boolean {
  if (!skill.auto) return true;
  const d = skill.draft ?? { namespace: undefined, reviewed: false };
  return d.reviewed || d.namespace === namespace;
}

/**
 * Why a SKILL.md was skipped, or what was changed to load it.
 * Contract: `file` is absolute; `line` is 1-based in that file when known; `message` says what
 * to fix; `loaded` is true when the skill was loaded anyway (name normalised, description cut).
 */
export interface SkillDiagnostic {
  code:
    | "KEEL_SKILL_INVALID"
    | "KEEL_SKILL_DUPLICATE"
    | "KEEL_SKILL_DIR_UNREADABLE"
    | "KEEL_SKILL_NAME_NORMALIZED"
    | "KEEL_SKILL_DESCRIPTION_CUT";
  file: string;
  line?: number;
  message: string;
  loaded?: boolean;
}

/** Longest description kept, in code points (Anthropic's SKILL.md spec caps `description` at 1,024). */
export const MAX_DESCRIPTION_CHARS = 1024;

/**
 * A skill name in kebab-case: lowercase, every run of characters other than a-z, 0-9, ".", "_"
 * and "-" replaced by one "-", no leading or trailing "-", at most 64 code points.
 * Contract: returns "" when nothing usable is left (the skill is then invalid).
 */
export function normalizeSkillName(name: string): string {
  const kebab = name
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^[-._]+|-+$/g, "");
  return headOf(kebab, 64).replace(/-+$/, "");
}

/** A change made to load a skill. */
type Note = { code: "KEEL_SKILL_NAME_NORMALIZED" | "KEEL_SKILL_DESCRIPTION_CUT"; line: number; message: string };

/** A root to scan. `auto` marks the drafts folder. */
export interface CatalogRoot {
  dir: string;
  auto?: boolean;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const MAX_DEPTH = 2;

type Parsed =
  | { ok: true; name: string; description: string; body: string; frontmatter: Record<string, unknown>; notes: Note[] }
  | { ok: false; line?: number; message: string };

/**
 * Parse one SKILL.md text. Contract: never throws; a failure says where (line in the file)
 * and what to fix.
 */
export function parseSkillFile(text: string): Parsed {
  const src = text.replace(/^\uFEFF/, "");
  const lines = src.split(/\r?\n/);
  if (lines[0]?.trim() !== "---")
    return {
      ok: false,
      line: 1,
      message: "the file must start with a `---` line opening the YAML frontmatter (name, description)",
    };
  const close = lines.findIndex((l, i) => i > 0 && l.trim() === "---");
  if (close < 0)
    return {
      ok: false,
      line: 1,
      message: "the YAML frontmatter opened on line 1 is never closed; add a `---` line after it",
    };
  const yamlText = lines.slice(1, close).join("\n");
  const doc = parseDocument(yamlText, { prettyErrors: false });
  if (doc.errors.length) {
    const err = doc.errors[0]!;
    const offset = err.pos?.[0] ?? 0;
    const yamlLine = yamlText.slice(0, offset).split("\n").length;
    return { ok: false, line: yamlLine + 1, message: `invalid YAML frontmatter: ${err.message.split("\n")[0]}` };
  }
  const data: unknown = doc.toJS();
  if (typeof data !== "object" || data === null || Array.isArray(data))
    return { ok: false, line: 2, message: "the frontmatter must be a YAML mapping with `name` and `description`" };
  const fm = data as Record<string, unknown>;
  const lineOf = (key: string) => {
    const i = lines.slice(1, close).findIndex((l) => l.startsWith(`${key}:`));
    return i < 0 ? 2 : i + 2;
  };
  if (typeof fm.name !== "string" || !fm.name.trim())
    return {
      ok: false,
      line: lineOf("name"),
      message: "missing `name`: add `name: <skill-name>` (letters, digits, . _ -) to the frontmatter",
    };
  const notes: Note[] = [];
  const declared = fm.name.trim();
  let name = declared;
  if (!NAME.test(declared)) {
    // A name that looks like a path is refused, not normalised: it is a mistake, not a style.
    name = /[\\/]/.test(declared) ? "" : normalizeSkillName(declared);
    if (!NAME.test(name))
      return {
        ok: false,
        line: lineOf("name"),
        message: `\`name\` "${headOf(declared, 80)}" is not a valid skill name: use 1-64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit (no "/")`,
      };
    notes.push({
      code: "KEEL_SKILL_NAME_NORMALIZED",
      line: lineOf("name"),
      message: `\`name\` "${headOf(declared, 80)}" is not kebab-case; loaded as "${name}". Set \`name: ${name}\` in the frontmatter`,
    });
  }
  if (typeof fm.description !== "string" || !fm.description.trim())
    return {
      ok: false,
      line: lineOf("description"),
      message: "missing `description`: add `description: <what the skill does and when to use it>` to the frontmatter",
    };
  let description = fm.description.trim().replace(/\s+/g, " ");
  const length = codePointLength(description);
  if (length > MAX_DESCRIPTION_CHARS) {
    description = truncate(description, MAX_DESCRIPTION_CHARS);
    notes.push({
      code: "KEEL_SKILL_DESCRIPTION_CUT",
      line: lineOf("description"),
      message: `\`description\` has ${length} characters; it was cut to ${MAX_DESCRIPTION_CHARS}. Shorten it and move details into the body`,
    });
  }
  return {
    ok: true,
    name,
    description,
    body: lines
      .slice(close + 1)
      .join("\n")
      .trim(),
    frontmatter: fm,
    notes,
  };
}

interface CacheEntry {
  stamp: string;
  parsed: Parsed;
  skill?: Skill;
}

/**
 * A catalog over roots, rescanned on demand.
 * Contract: `refresh()` never throws; it returns true when the set of skills changed; skills
 * keep the order of their roots (earlier roots win duplicates), then of their paths.
 */
export class SkillCatalog {
  private readonly roots: CatalogRoot[];
  private cache = new Map<string, CacheEntry>();
  private stamp = "";
  private list: Skill[] = [];
  private byName = new Map<string, Skill>();
  private diags: SkillDiagnostic[] = [];

  private readonly autoDir: string | undefined;

  /** `autoDir`: skills found inside it are marked `auto` (drafts). */
  constructor(roots: readonly CatalogRoot[], options: { autoDir?: string } = {}) {
    this.roots = [...roots];
    this.autoDir = options.autoDir;
  }

  /** Loaded skills, in catalog order. */
  get skills(): readonly Skill[] {
    return this.list;
  }

  /** Diagnostics of the last scan. */
  get diagnostics(): readonly SkillDiagnostic[] {
    return this.diags;
  }

  /** The skill with that name. */
  get(name: string): Skill | undefined {
    return this.byName.get(name);
  }

  /** Rescan the roots; parse only SKILL.md files whose mtime or size changed. */
  refresh(): boolean {
    const found: Array<{ file: string; root: CatalogRoot; stamp: string }> = [];
    const diags: SkillDiagnostic[] = [];
    for (const root of this.roots) this.walk(root, root.dir, 0, found, diags);
    const stamp = `${found.map((f) => `${f.file}@${f.stamp}`).join("\n")}#${diags.length}`;
    if (stamp === this.stamp) return false;
    this.stamp = stamp;
    const cache = new Map<string, CacheEntry>();
    const list: Skill[] = [];
    const byName = new Map<string, Skill>();
    for (const { file, root, stamp: fileStamp } of found) {
      let entry = this.cache.get(file);
      if (!entry || entry.stamp !== fileStamp) {
        let parsed: Parsed;
        try {
          // A FIFO or device linked in as SKILL.md is refused, never waited on.
          parsed = parseSkillFile(readRegularFile(file).toString("utf8"));
        } catch (err) {
          parsed = { ok: false, message: `cannot read the file (${(err as Error).message}); check its permissions` };
        }
        entry = { stamp: fileStamp, parsed };
      }
      cache.set(file, entry);
      const p = entry.parsed;
      if (!p.ok) {
        diags.push({
          code: "KEEL_SKILL_INVALID",
          file,
          ...(p.line !== undefined ? { line: p.line } : {}),
          message: p.message,
        });
        continue;
      }
      for (const note of p.notes) diags.push({ ...note, file, loaded: true });
      const prior = byName.get(p.name);
      if (prior) {
        diags.push({
          code: "KEEL_SKILL_DUPLICATE",
          file,
          line: 2,
          message: `skill "${p.name}" is already loaded from ${prior.file}; rename one of them (the first one found is kept)${p.frontmatter.name !== p.name ? ` (its name "${headOf(String(p.frontmatter.name).trim(), 80)}" normalises to "${p.name}")` : ""}`,
        });
        if (p.notes.length) diags.splice(diags.length - 1 - p.notes.length, p.notes.length);
        continue;
      }
      if (entry.skill && entry.skill.root === root.dir) {
        list.push(entry.skill);
        byName.set(p.name, entry.skill);
        continue;
      }
      const dir = join(file, "..");
      let real = dir;
      try {
        real = realpathSync(dir);
      } catch {
        /* keep the path as found */
      }
      const auto = Boolean(root.auto) || (this.autoDir !== undefined && isInside(this.autoDir, dir));
      const skill: Skill = {
        name: p.name,
        description: p.description,
        body: p.body,
        dir: real,
        file,
        root: root.dir,
        auto,
        ...(auto ? { draft: readDraftScope(dir) } : {}),
        frontmatter: p.frontmatter,
      };
      entry.skill = skill;
      list.push(skill);
      byName.set(p.name, skill);
    }
    this.cache = cache;
    const changed = list.length !== this.list.length || list.some((s, i) => s !== this.list[i]);
    this.list = list;
    this.byName = byName;
    this.diags = diags;
    return changed;
  }

  private walk(
    root: CatalogRoot,
    dir: string,
    depth: number,
    found: Array<{ file: string; root: CatalogRoot; stamp: string }>,
    diags: SkillDiagnostic[],
  ): void {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (depth > 0 || code !== "ENOENT")
        diags.push({
          code: "KEEL_SKILL_DIR_UNREADABLE",
          file: dir,
          message: `cannot list the folder (${code ?? (err as Error).message}); check that it exists and is readable`,
        });
      return;
    }
    const skillFile = entries.find((e) => e.name === "SKILL.md" && (e.isFile() || e.isSymbolicLink()));
    if (skillFile && depth > 0) {
      const file = join(dir, skillFile.name);
      try {
        const st = statSync(file);
        let manifest = "";
        try {
          if (this.autoDir !== undefined && isInside(this.autoDir, dir))
            manifest = `:${statSync(join(dir, "manifest.json")).mtimeMs}`;
        } catch {
          // no manifest: the draft stays unreviewed
        }
        found.push({ file, root, stamp: `${st.mtimeMs}:${st.size}${manifest}` });
      } catch {
        diags.push({
          code: "KEEL_SKILL_INVALID",
          file,
          message: "SKILL.md cannot be read (dangling link?); fix or remove it",
        });
      }
      return;
    }
    if (depth >= MAX_DEPTH) return;
    const subdirs = entries
      .filter((e) => (e.isDirectory() || e.isSymbolicLink()) && !e.name.startsWith(".") && e.name !== "node_modules")
      .map((e) => e.name)
      .sort();
    for (const name of subdirs) {
      const sub = join(dir, name);
      try {
        if (!statSync(sub).isDirectory()) continue;
      } catch {
        continue;
      }
      this.walk(root, sub, depth + 1, found, diags);
    }
  }
}

/** True when `child` is `parent` or inside it (both real paths). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !rel.startsWith(sep) && !/^[A-Za-z]:/.test(rel));
}
