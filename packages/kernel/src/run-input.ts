/** What run() is given, checked at the door: the input (text or content blocks) and the output schema. */
import { z } from "zod";
import { errorMessage, KeelError } from "./errors.ts";
import type { ContentBlock } from "./messages.ts";
import { snapshot } from "./snapshot.ts";
import { toWellFormed } from "./text.ts";
import type { OutputSpec, TurnInput } from "./turn.ts";

const MEDIA = /^image\/(png|jpeg|gif|webp)$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The input as the turn takes it: a string, or a copy of its content blocks.
 * Contract: throws KEEL_INPUT_INVALID naming the block at fault; text is made well-formed;
 * an image is `{ type: "image", mediaType: "image/png|jpeg|gif|webp", data: <base64> }` (a
 * `data:` URL is accepted and split).
 */
export function checkInput(input: unknown): TurnInput {
  if (typeof input === "string") return input;
  const bad = (where: string, what: string) => new KeelError("KEEL_INPUT_INVALID", `run() input ${where}: ${what}.`);
  if (!Array.isArray(input)) throw bad("", `got ${input === null ? "null" : typeof input}`);
  let blocks: unknown[];
  try {
    blocks = snapshot(input) as unknown[];
  } catch (err) {
    throw bad("", `could not be read (${errorMessage(err)})`);
  }
  if (!blocks.length) throw bad("", "is an empty array; give at least one text or image block");
  return blocks.map((b, i): ContentBlock => {
    const o = (b ?? {}) as Record<string, unknown>;
    if (o.type === "text") {
      if (typeof o.text !== "string") throw bad(`[${i}]`, "a text block needs a string `text`");
      return { type: "text", text: toWellFormed(o.text) };
    }
    if (o.type === "image") {
      let mediaType = o.mediaType;
      let data = o.data;
      if (typeof data === "string" && data.startsWith("data:")) {
        const m = /^data:([^;,]+);base64,(.*)$/s.exec(data);
        if (!m) throw bad(`[${i}]`, "a data: URL must be base64 (data:image/png;base64,...)");
        mediaType ??= m[1];
        data = m[2];
      }
      if (typeof mediaType !== "string" || !MEDIA.test(mediaType)) throw bad(`[${i}]`, `an image needs mediaType image/png, image/jpeg, image/gif or image/webp (got ${JSON.stringify(mediaType)})`);
      if (typeof data !== "string" || !data.length || !BASE64.test(data)) throw bad(`[${i}]`, "an image needs `data`: base64 without line breaks (or a data: URL)");
      return { type: "image", mediaType, data };
    }
    throw bad(`[${i}]`, `unknown block type ${JSON.stringify(o.type)}; use "text" or "image"`);
  });
}

/**
 * The structured-output request for a zod object schema.
 * Contract: throws KEEL_OUTPUT_SCHEMA_INVALID for a non-object schema or one with no JSON Schema form.
 */
export function outputSpecOf(schema: unknown, name = "final_answer"): OutputSpec {
  const s = schema as z.ZodType;
  if (typeof (s as { safeParse?: unknown } | null)?.safeParse !== "function") throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", "`output` is not a zod schema.");
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", `outputName ${JSON.stringify(name)} must match ^[A-Za-z0-9_-]{1,64}$.`);
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  } catch (err) {
    throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", `\`output\` has no JSON Schema form: ${errorMessage(err)}.`);
  }
  if (json.type !== "object") throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", `\`output\` describes ${JSON.stringify(json.type ?? "a union")}, not an object.`);
  const { $schema: _drop, ...rest } = json;
  return { schema: s as OutputSpec["schema"], format: { name, schema: rest } };
}
