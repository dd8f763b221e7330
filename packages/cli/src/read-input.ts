/**
 * The input of `keel run`: its arguments, stdin, or both (`git diff | keel run "review this"`),
 * as pi and `claude -p` take it.
 */

/** Where the input comes from. */
export interface InputSource {
  /** The positionals after `run`; `-` stands for stdin. */
  words: readonly string[];
  stdin: NodeJS.ReadableStream;
  /** True when stdin is a terminal (it is then never read). */
  stdinIsTTY: boolean;
  /** With words and piped stdin: how long to wait for stdin's first bytes (KEEL_STDIN_WAIT_MS). */
  waitMs: number;
  /** A line for stderr. */
  note: (line: string) => void;
}

/** Default of KEEL_STDIN_WAIT_MS. */
export const DEFAULT_STDIN_WAIT_MS = 3_000;

/** KEEL_STDIN_WAIT_MS as a number of ms (the default when unset or not a number >= 0). */
export function stdinWaitMs(env: NodeJS.ProcessEnv): number {
  const raw = Number(env.KEEL_STDIN_WAIT_MS);
  return env.KEEL_STDIN_WAIT_MS !== undefined && env.KEEL_STDIN_WAIT_MS !== "" && Number.isFinite(raw) && raw >= 0
    ? raw
    : DEFAULT_STDIN_WAIT_MS;
}

/**
 * The turn's input. Arguments alone: them, joined by spaces. No argument, or `-`: all of stdin
 * (when it is not a terminal). Arguments and piped stdin: the arguments, a blank line, then
 * stdin between `<stdin>` and `</stdin>` lines; if stdin gives nothing within `waitMs` it is left
 * out and `note` says so (with `-` among the arguments it is waited for without a bound).
 * Contract: returns the trimmed input, possibly empty (the caller makes that a usage error).
 */
export async function readRunInput(src: InputSource): Promise<string> {
  const dash = src.words.includes("-");
  const question = src.words
    .filter((w) => w !== "-")
    .join(" ")
    .trim();
  if (src.stdinIsTTY) return question;
  if (!question) return (await readAll(src.stdin, Number.POSITIVE_INFINITY)).text.trim();
  const piped = await readAll(src.stdin, dash ? Number.POSITIVE_INFINITY : src.waitMs);
  if (piped.timedOut)
    src.note(
      `keel: stdin gave nothing within ${src.waitMs} ms; going on without it (keel run - "…" waits for it; < /dev/null skips it; KEEL_STDIN_WAIT_MS sets the wait)`,
    );
  const context = piped.text.replace(/\s+$/u, "");
  return context.trim() ? `${question}\n\n<stdin>\n${context}\n</stdin>` : question;
}

/**
 * Everything `stream` gives until its end, decoded as UTF-8. When nothing at all (no byte, no
 * end) arrives within `firstByteMs`, stop listening and return "" with `timedOut`.
 */
function readAll(stream: NodeJS.ReadableStream, firstByteMs: number): Promise<{ text: string; timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = (timedOut: boolean) => {
      clearTimeout(timer);
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("error", onError);
      if (timedOut) {
        // Not read any further: a pipe nobody writes to must not keep the process alive.
        stream.pause();
        (stream as { unref?: () => void }).unref?.();
      }
      resolve({ text: Buffer.concat(chunks).toString("utf8"), timedOut });
    };
    const onData = (c: Buffer | string) => {
      clearTimeout(timer);
      chunks.push(typeof c === "string" ? Buffer.from(c) : c);
    };
    const onEnd = () => done(false);
    const onError = (err: unknown) => {
      clearTimeout(timer);
      reject(err);
    };
    stream.on("data", onData);
    stream.once("end", onEnd);
    stream.once("error", onError);
    if (Number.isFinite(firstByteMs)) timer = setTimeout(() => done(true), firstByteMs);
    stream.resume();
  });
}
