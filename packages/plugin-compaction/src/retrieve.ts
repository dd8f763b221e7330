/** The retrieval tool: read a compressed or masked output back from the store, by range. */
import type { ToolDefinition } from "@keel/kernel";
import { defineTool, KeelError } from "@keel/kernel";
import { z } from "zod";
import type { RawStorage } from "./store.ts";
import { sliceRaw } from "./store.ts";

const line = z.number().int().positive();
const char = z.number().int().nonnegative();

/** Arguments of the retrieval tool. */
export const RetrieveArgs = z
  .object({
    id: z.string().min(1),
    startLine: line.optional(),
    endLine: line.optional(),
    startChar: char.optional(),
    endChar: char.optional(),
  })
  .strict();

/** Longest text one call returns. */
export const RETRIEVE_MAX_CHARS = 12_000;

/**
 * Contract: never throws for a bad id or range; answers an error result that says what to do;
 * reads only outputs of the calling session (another session's id is "not found", whether
 * guessed or leaked).
 */
export function retrieveTool(name: string, store: RawStorage): ToolDefinition<z.infer<typeof RetrieveArgs>> {
  return defineTool({
    name,
    description:
      "Read back a compressed or masked output by the id in its header; lines are 1-based inclusive, chars 0-based end-exclusive.",
    input: RetrieveArgs,
    // Spelled out (not derived from `input`) to keep the schema sent with every request small.
    parameters: {
      type: "object",
      properties: {
        id: { type: "string" },
        startLine: { type: "integer" },
        endLine: { type: "integer" },
        startChar: { type: "integer" },
        endChar: { type: "integer" },
      },
      required: ["id"],
    },
    category: "info",
    async execute(args, ctx) {
      const rec = await store.get(args.id, ctx.sessionId);
      if (!rec)
        return {
          content: `Error: ${new KeelError("KEEL_COMPACTION_NOT_FOUND", `no stored output has id "${args.id}".`, { tool: name }).message}`,
          isError: true,
        };
      const range = {
        ...(args.startLine !== undefined ? { startLine: args.startLine } : {}),
        ...(args.endLine !== undefined ? { endLine: args.endLine } : {}),
        ...(args.startChar !== undefined ? { startChar: args.startChar } : {}),
        ...(args.endChar !== undefined ? { endChar: args.endChar } : {}),
      };
      const s = sliceRaw(rec.text, range, RETRIEVE_MAX_CHARS);
      const more = s.truncated ? ` Cut at ${RETRIEVE_MAX_CHARS} characters: ask for a narrower range to read on.` : "";
      return `[${name} ${rec.id}: ${rec.toolName} output, ${s.from}.${more}]\n${s.text}`;
    },
  });
}
