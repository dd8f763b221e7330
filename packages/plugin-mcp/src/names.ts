import { createHash } from "node:crypto";

/** Longest tool name the providers accept. */
export const MAX_TOOL_NAME = 64;

const UNSAFE = /[^a-zA-Z0-9_-]+/g;

/** Hex digits of the hash a cut name ends with. */
const HASH_CHARS = 8;
/** Characters of the full name a cut name keeps, before `_` and its hash. */
const CUT_KEEP = MAX_TOOL_NAME - HASH_CHARS - 1;

/** Short stable hash of a string (hex). */
export function shortHash(text: string, length = HASH_CHARS): string {
  return createHash("sha256").update(text).digest("hex").slice(0, length);
}

/** `text` with every run of characters outside [a-zA-Z0-9_-] replaced by `_` (never empty). */
export function sanitizePart(text: string): string {
  const s = text.replace(UNSAFE, "_");
  return s.length ? s : "_";
}

/**
 * The exposed name of an MCP tool: `mcp__<server>__<tool>`, sanitised to ^[a-zA-Z0-9_-]{1,64}$.
 * Contract: deterministic; names up to 64 characters get no suffix (see `assignToolNames` for
 * collisions); longer ones are cut and end with `_` and an 8-hex hash of the raw server and
 * tool names, so two long names stay distinct.
 */
export function sanitizeToolName(server: string, tool: string): string {
  const name = `mcp__${sanitizePart(server)}__${sanitizePart(tool)}`;
  if (name.length <= MAX_TOOL_NAME) return name;
  return withSuffix(name, shortHash(`${server}\u0000${tool}`));
}

/**
 * Whether the exposed name `name` may be a tool of server `server` (by its `mcp__<server>__`
 * prefix, also when a long key was cut out of the name for its hash suffix).
 * Contract: true for every name `assignToolNames` gives a tool of `server`; it may also be true
 * for a tool of another server whose sanitised key shares that prefix.
 */
export function mayBeOf(name: string, server: string): boolean {
  const prefix = `mcp__${sanitizePart(server)}__`;
  if (name.startsWith(prefix)) return true;
  // A cut name keeps CUT_KEEP characters of the full name (see withSuffix).
  return name.length === MAX_TOOL_NAME && prefix.length > CUT_KEEP && name.startsWith(prefix.slice(0, CUT_KEEP));
}

function withSuffix(name: string, hash: string): string {
  return `${name.slice(0, CUT_KEEP)}_${hash}`;
}

/** An MCP tool's identity: the server key it came from and its name there. Contract: raw, unsanitised. */
export interface ToolIdentity {
  server: string;
  tool: string;
}

/**
 * Exposed names for a set of MCP tools, keyed by `server\0tool`.
 * Contract: every name matches ^[a-zA-Z0-9_-]{1,64}$ and is unique, also against `reserved`
 * (e.g. built-in tool names); when sanitising makes names collide, each colliding tool gets a
 * hash suffix of its raw identity, so the result does not depend on input order.
 */
export function assignToolNames(tools: readonly ToolIdentity[], reserved: Iterable<string> = []): Map<string, string> {
  const taken = new Set(reserved);
  const base = new Map<string, string[]>();
  for (const t of tools) {
    const key = identityKey(t);
    const name = sanitizeToolName(t.server, t.tool);
    const list = base.get(name);
    if (list) {
      if (!list.includes(key)) list.push(key);
    } else base.set(name, [key]);
  }
  const out = new Map<string, string>();
  const clashing: Array<[string, string]> = [];
  for (const [name, keys] of base) {
    if (keys.length === 1 && !taken.has(name)) {
      out.set(keys[0]!, name);
      taken.add(name);
    } else for (const k of keys) clashing.push([k, name]);
  }
  for (const [key, name] of clashing.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    const hash = shortHash(key);
    let candidate = name.length + hash.length + 1 <= MAX_TOOL_NAME ? `${name}_${hash}` : withSuffix(name, hash);
    for (let i = 2; taken.has(candidate); i++) candidate = withSuffix(name, shortHash(`${key}#${i}`));
    out.set(key, candidate);
    taken.add(candidate);
  }
  return out;
}

/** The map key of a tool identity. Contract: distinct identities give distinct keys. */
export function identityKey(t: ToolIdentity): string {
  return `${t.server}\u0000${t.tool}`;
}
