/**
 * The repository's Markdown as the doc tests read it: which pages are guides, their fenced
 * code blocks (with the hidden context a fragment is checked in), their links and the anchors
 * their headings make on a code host.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const REPO = join(import.meta.dirname, "..", "..");

/** A page written by `node scripts/gen-docs.ts` says so at its top. */
export function isGenerated(text: string): boolean {
  return /do not edit by hand/.test(text.split("\n").slice(0, 5).join("\n"));
}

/**
 * README.md and every page in docs/, as paths from the repository root.
 * Contract: README.md first, then docs/ in name order; `guidesOnly` leaves out the generated pages.
 */
export function docPages(guidesOnly = false): string[] {
  const docs = readdirSync(join(REPO, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs].filter((p) => !guidesOnly || !isGenerated(read(p)));
}

export function read(path: string): string {
  return readFileSync(join(REPO, path), "utf8");
}

/** A fenced code block: its info string's first word, its code, and where the code starts (1-based line). */
export interface Fence {
  lang: string;
  code: string;
  line: number;
  /**
   * The hidden context a fragment is checked in: an HTML comment `<!-- snippet-context … -->`
   * right above the fence. Its lines go before the snippet, those after a line holding only `…`
   * after it. Code hosts do not show the comment.
   */
  context?: { before: string; after: string };
}

/** Every fenced block of a page, in order. */
export function fences(text: string): Fence[] {
  const lines = text.split("\n");
  const found: Fence[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]!);
    if (!open) continue;
    const marker = open[1]!;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.startsWith(marker)) end++;
    const fence: Fence = { lang: open[2]!, code: `${lines.slice(i + 1, end).join("\n")}\n`, line: i + 2 };
    const context = contextAbove(lines, i);
    if (context) fence.context = context;
    found.push(fence);
    i = end;
  }
  return found;
}

function contextAbove(lines: string[], fenceAt: number): Fence["context"] {
  let close = fenceAt - 1;
  while (close >= 0 && lines[close]!.trim() === "") close--;
  if (close < 0 || lines[close]!.trim() !== "-->") return undefined;
  let open = close - 1;
  while (open >= 0 && !lines[open]!.startsWith("<!--")) open--;
  if (open < 0 || lines[open]!.trim() !== "<!-- snippet-context") return undefined;
  const body = lines.slice(open + 1, close);
  const gap = body.findIndex((l) => l.trim() === "…");
  return gap < 0
    ? { before: `${body.join("\n")}\n`, after: "" }
    : { before: `${body.slice(0, gap).join("\n")}\n`, after: `${body.slice(gap + 1).join("\n")}\n` };
}

/**
 * The first fenced block of `lang` under the heading whose text is `heading` (any level).
 * Contract: undefined when the heading or the block is missing; the search stops at the next heading of the same or a higher level.
 */
export function snippetUnder(text: string, heading: string, lang = "ts"): string | undefined {
  const lines = text.split("\n");
  const at = lines.findIndex((l) => /^#{1,6} /.test(l) && l.replace(/^#+ /, "") === heading);
  if (at < 0) return undefined;
  const level = /^#+/.exec(lines[at]!)![0].length;
  let end = lines.length;
  for (let i = at + 1, inFence = false; i < lines.length; i++) {
    if (/^(`{3,}|~{3,})/.test(lines[i]!)) inFence = !inFence;
    const h = /^(#{1,6}) /.exec(lines[i]!);
    if (!inFence && h && h[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return fences(lines.slice(at + 1, end).join("\n")).find((f) => f.lang === lang)?.code;
}

/** The text of a page with its fenced blocks blanked (line numbers kept), and inline code removed unless `keepCode`. */
function prose(text: string, keepCode = false): string[] {
  const lines = text.split("\n");
  let marker: string | undefined;
  return lines.map((line) => {
    const m = /^(`{3,}|~{3,})/.exec(line);
    if (marker) {
      if (line.startsWith(marker)) marker = undefined;
      return "";
    }
    if (m) {
      marker = m[1];
      return "";
    }
    return keepCode ? line : line.replace(/(`+)[^`]*?\1/g, "");
  });
}

/** Every link and image target in a page's prose (inline and reference definitions), with its line. */
export function links(text: string): { target: string; line: number }[] {
  const found: { target: string; line: number }[] = [];
  prose(text).forEach((line, i) => {
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      found.push({ target: m[1]!, line: i + 1 });
    const def = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)/.exec(line);
    if (def) found.push({ target: def[1]!, line: i + 1 });
    for (const m of line.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g))
      found.push({ target: m[1]!, line: i + 1 });
  });
  return found;
}

/** A heading's anchor as GitHub, GitLab and Gitea make it: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a page offers: its headings' slugs (a repeated one gets -1, -2, …) and explicit `id`/`name` anchors. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  prose(text, true).forEach((line) => {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  });
  return out;
}
