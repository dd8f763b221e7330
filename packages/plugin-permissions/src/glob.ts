/**
 * Globs without backtracking: a pattern is compiled to a small automaton (Thompson's
 * construction) and run over the text one code point at a time with a set of live states, so
 * a match costs at most (code points × pattern states) steps whatever the pattern or the
 * text: `a*a*a*a*b` against a million `a`s cannot hang.
 */

/** How `*` treats `/`: `text` (a command, a tool name) lets it match anything; `path` stops it at `/`. */
export type GlobMode = "text" | "path";

/** A compiled glob. Contract: `test` is pure and runs in O(code points × states). */
export interface Glob {
  readonly pattern: string;
  test(text: string): boolean;
}

/** The longest pattern a rule may hold, in code points. */
export const MAX_PATTERN_CHARS = 1_000;

type Test = (c: string) => boolean;
/** A state: consume one code point passing `test` and go to `next`, or (no test) split to `next` and `alt`. */
interface State {
  test?: Test;
  next: number;
  alt?: number;
}

const any: Test = () => true;
const notSlash: Test = (c) => c !== "/";
const is =
  (ch: string): Test =>
  (c) =>
    c === ch;

/** Pattern tokens: one code point to match, `*`, `**` or `**` followed by `/` (zero or more whole folders). */
type Token = { lit: string } | { one: true } | { star: "one" | "all" | "dirs" };

/**
 * Split a glob into tokens. Contract: throws an Error saying what is wrong (a trailing `\`,
 * three stars in a row, an empty or over-long pattern); `\` escapes the next character.
 */
export function tokenize(pattern: string, mode: GlobMode): Token[] {
  const chars = [...pattern];
  if (!chars.length) throw new Error("the pattern is empty");
  if (chars.length > MAX_PATTERN_CHARS) throw new Error(`the pattern is longer than ${MAX_PATTERN_CHARS} characters`);
  const out: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === "\\") {
      if (i + 1 >= chars.length) throw new Error("the pattern ends in a lone `\\` (escape a backslash as `\\\\`)");
      out.push({ lit: chars[++i]! });
    } else if (c === "?") out.push({ one: true });
    else if (c !== "*") out.push({ lit: c });
    else {
      let n = 1;
      while (chars[i + 1] === "*") n++, i++;
      if (n > 2) throw new Error("`***` is not a glob: use `*` (one name) or `**` (any depth)");
      if (n === 1 || mode === "text") out.push({ star: "one" });
      else if (chars[i + 1] === "/" && (i < 2 || chars[i - 2] === "/")) {
        out.push({ star: "dirs" });
        i++;
      } else out.push({ star: "all" });
    }
  }
  return out;
}

/** Build the automaton; state 0 is the start, the last state accepts. */
function build(tokens: readonly Token[], mode: GlobMode): State[] {
  const states: State[] = [];
  const one = mode === "path" ? notSlash : any;
  for (const t of tokens) {
    const here = states.length;
    if ("lit" in t) states.push({ test: is(t.lit), next: here + 1 });
    else if ("one" in t) states.push({ test: one, next: here + 1 });
    else if (t.star === "dirs") {
      // (.*/)? : skip to the next token, or any code points then a `/`.
      states.push({ next: here + 4, alt: here + 1 });
      states.push({ next: here + 2, alt: here + 3 });
      states.push({ test: any, next: here + 1 });
      states.push({ test: is("/"), next: here + 4 });
    } else {
      // `*` (one name in path mode) or `**`: loop on a test, or go on.
      states.push({ next: here + 2, alt: here + 1 });
      states.push({ test: t.star === "all" ? any : one, next: here });
    }
  }
  states.push({ next: -1 });
  return states;
}

/** Add `s` and every state reachable from it without consuming input. */
function close(states: readonly State[], s: number, into: Set<number>): void {
  if (s < 0 || into.has(s)) return;
  into.add(s);
  const st = states[s]!;
  if (st.test) return;
  close(states, st.next, into);
  if (st.alt !== undefined) close(states, st.alt, into);
}

/**
 * Compile a glob: `*` is any run of characters (not `/` in `path` mode), `**` any run at all,
 * `**` followed by `/` zero or more folders, `?` one character (not `/` in `path` mode), `\` escapes.
 * Contract: throws an Error naming the problem for a malformed pattern; the whole text must match.
 */
export function compileGlob(pattern: string, mode: GlobMode): Glob {
  const tokens = tokenize(pattern, mode);
  const states = build(tokens, mode);
  const accept = states.length - 1;
  // The literal text the pattern starts with: a text without it is rejected at once (a table of
  // 10,000 rules anchored at different folders costs a string compare per rule, not an automaton).
  let prefix = "";
  for (const t of tokens) {
    if (!("lit" in t)) break;
    prefix += t.lit;
  }
  return {
    pattern,
    test(text: string): boolean {
      if (!text.startsWith(prefix)) return false;
      let live = new Set<number>();
      close(states, 0, live);
      for (const c of text) {
        const next = new Set<number>();
        for (const s of live) {
          const st = states[s]!;
          if (st.test?.(c)) close(states, st.next, next);
        }
        if (!next.size) return false;
        live = next;
      }
      return live.has(accept);
    },
  };
}
