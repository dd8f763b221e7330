/** What run() is given, checked at the door: the input (text or content blocks) and the output schema. */
import * as z from "zod/mini";
import { errorMessage, KeelError } from "./errors.ts";
import type { ContentBlock } from "./messages.ts";
import type { OutputFormat } from "./provider.ts";
import { snapshot } from "./snapshot.ts";
import { toWellFormed, truncate } from "./text.ts";
import type { ZodSchema } from "./tools.ts";
import type { OutputSpec, TurnInput } from "./turn-state.ts";

const MEDIA = /^image\/(png|jpeg|gif|webp)$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** An image's or file's media type and base64 data; a `data:` URL is split. */
function mediaOf(o: Record<string, unknown>, bad: (what: string) => KeelError): { mediaType: string; data: string } {
  let mediaType = o.mediaType;
  let data = o.data;
  if (typeof data === "string" && data.startsWith("data:")) {
    const m = /^data:([^;,]+);base64,(.*)$/s.exec(data);
    if (!m)
      throw bad(`a data: URL must be base64 (data:${o.type === "image" ? "image/png" : "application/pdf"};base64,...)`);
    mediaType ??= m[1];
    data = m[2];
  }
  if (typeof mediaType !== "string")
    throw bad(`${o.type === "image" ? "an image" : "a file"} needs a string mediaType`);
  if (typeof data !== "string" || !data.length || !BASE64.test(data))
    throw bad(
      `${o.type === "image" ? "an image" : "a file"} needs \`data\`: base64 without line breaks (or a data: URL)`,
    );
  return { mediaType, data };
}

/**
 * The input as the turn takes it: a string, or a copy of its content blocks.
 * Contract: throws KEEL_INPUT_INVALID naming the block at fault; text is made well-formed;
 * an image is `{ type: "image", mediaType: "image/png|jpeg|gif|webp", data: <base64> }` (a
 * `data:` URL is accepted and split); a file is a PDF, `{ type: "file", mediaType: "application/pdf",
 * data, name? }`.
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
  if (!blocks.length) throw bad("", "is an empty array; give at least one text, image or file block");
  return blocks.map((b, i): ContentBlock => {
    const o = (b ?? {}) as Record<string, unknown>;
    if (o.type === "text") {
      if (typeof o.text !== "string") throw bad(`[${i}]`, "a text block needs a string `text`");
      return { type: "text", text: toWellFormed(o.text) };
    }
    if (o.type === "image" || o.type === "file") {
      const { mediaType, data } = mediaOf(o, (what) => bad(`[${i}]`, what));
      if (o.type === "image") {
        if (!MEDIA.test(mediaType))
          throw bad(
            `[${i}]`,
            `an image needs mediaType image/png, image/jpeg, image/gif or image/webp (got ${JSON.stringify(mediaType)})`,
          );
        return { type: "image", mediaType, data };
      }
      if (mediaType !== "application/pdf")
        throw bad(
          `[${i}]`,
          `a file must be a PDF, mediaType "application/pdf" (got ${JSON.stringify(mediaType)}); send other documents as text`,
        );
      if (o.name !== undefined && (typeof o.name !== "string" || !o.name.length))
        throw bad(`[${i}]`, "a file's `name` must be a non-empty string");
      return {
        type: "file",
        mediaType,
        data,
        ...(typeof o.name === "string" ? { name: truncate(toWellFormed(o.name), 255) } : {}),
      };
    }
    throw bad(`[${i}]`, `unknown block type ${JSON.stringify(o.type)}; use "text", "image" or "file"`);
  });
}

/**
 * The structured-output request for a zod object schema.
 * Contract: throws KEEL_OUTPUT_SCHEMA_INVALID for a non-object schema or one with no JSON Schema
 * form; with `format` (a recorded one, RunOptions.outputFormat), that format is sent as given.
 */
export function outputSpecOf(schema: unknown, name = "final_answer", format?: OutputFormat): OutputSpec {
  const s = schema as ZodSchema;
  if (typeof (s as { safeParse?: unknown } | null)?.safeParse !== "function")
    throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", "`output` is not a zod schema.");
  if (format !== undefined) {
    if (typeof format?.name !== "string" || typeof format.schema !== "object" || format.schema === null)
      throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", "`outputFormat` needs a `name` and a JSON Schema `schema`.");
    return { schema: s as OutputSpec["schema"], format: { name: format.name, schema: format.schema } };
  }
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name))
    throw new KeelError(
      "KEEL_OUTPUT_SCHEMA_INVALID",
      `outputName ${JSON.stringify(name)} must match ^[A-Za-z0-9_-]{1,64}$.`,
    );
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  } catch (err) {
    throw new KeelError("KEEL_OUTPUT_SCHEMA_INVALID", `\`output\` has no JSON Schema form: ${errorMessage(err)}.`);
  }
  if (json.type !== "object")
    throw new KeelError(
      "KEEL_OUTPUT_SCHEMA_INVALID",
      `\`output\` describes ${JSON.stringify(json.type ?? "a union")}, not an object.`,
    );
  const { $schema: _drop, ...rest } = json;
  return { schema: s as OutputSpec["schema"], format: { name, schema: rest } };
}
