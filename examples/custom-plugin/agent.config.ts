/**
 * An agent whose plugin is written right here in the config: "house-rules" puts the team's
 * conventions into every prompt and refuses destructive tools unless the turn says
 * `--allow-destructive`. Offline it replays script.json, in which the model tries to
 * delete a note, is refused, and explains why.
 */
import { z } from "zod";
import { defineConfig, definePlugin, defineTool } from "@keel/agent";

const notes = new Map([
  ["standup", "Ship the CLI on Friday."],
  ["retro", "Tests were slow; keep benches out of the suite."],
]);

const readNote = defineTool({
  name: "read_note",
  description: "Read a team note by name.",
  input: z.object({ name: z.string() }),
  execute: ({ name }) =>
    notes.get(name) ?? { content: `No note "${name}". Notes: ${[...notes.keys()].join(", ")}`, isError: true },
});

const deleteNote = defineTool({
  name: "delete_note",
  description: "Delete a team note by name.",
  input: z.object({ name: z.string() }),
  category: "edit",
  meta: { destructive: true },
  execute: ({ name }) => (notes.delete(name) ? `Deleted ${name}.` : `No note "${name}".`),
});

const houseRules = definePlugin({
  name: "house-rules",
  version: "1.0.0",
  kernel: "^1",
  options: z.object({ rules: z.array(z.string()).min(1) }),
  input: { rules: ["Answer in at most three sentences.", "Never delete anything without explicit permission."] },
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", () => ({
      kind: "prompt_section",
      id: "rules",
      sectionId: "house_rules",
      title: "House rules",
      domain: "policy",
      content: ctx.options.rules.map((r) => `- ${r}`).join("\n"),
    }));
    ctx.on("tool.pre_call", (e) => {
      const destructive =
        (e.call.category === "edit" && e.call.name.startsWith("delete")) || e.call.name.includes("drop");
      if (destructive && !e.input.includes("--allow-destructive")) {
        return {
          kind: "tool_decision",
          decision: "deny",
          reason: "house rules: destructive tools need --allow-destructive in the request",
        };
      }
      return undefined;
    });
  },
});

export default defineConfig({
  name: "custom-plugin",
  model: "openai:gpt-4.1-mini",
  instructions: "You help a team keep its notes tidy.",
  tools: [readNote, deleteNote],
  plugins: [houseRules, process.env.KEEL_EXAMPLE_DISABLE_RULES === "1" && houseRules],
  offline: { script: "./script.json" },
});
