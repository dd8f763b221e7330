// An agent that must have its plan approved before it edits, and delegates reading to a
// "researcher" subagent. Offline by default: script.json plays the model for both.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, defineTool } from "@keel/agent";
import plan from "@keel/plugin-plan";
import tasks from "@keel/plugin-tasks";
import { z } from "zod";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(process.env.KEEL_HOME ?? join(here, ".keel"), "out");

const readFile = defineTool({
  name: "read_file",
  description: "Reads a file of the project.",
  category: "info",
  input: z.object({ path: z.string() }),
  execute: ({ path }) => readFileSync(join(here, "project", path.replace(/\.\.+/g, "")), "utf8"),
});

const writeFile = defineTool({
  name: "write_file",
  description: "Writes a file (into the agent's output folder).",
  category: "edit",
  input: z.object({ path: z.string(), text: z.string() }),
  execute: ({ path, text }) => {
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, path.replace(/[/\\]|\.\.+/g, "_")), text);
    return `wrote ${path}`;
  },
});

export default defineConfig({
  name: "delegation",
  instructions: "You prepare releases. Plan first; delegate reading to the researcher.",
  tools: [writeFile],
  plugins: [
    plan({ start: true }),
    tasks({
      profiles: {
        researcher: {
          description: "Reads the project's files and reports what matters, briefly.",
          instructions: "Read what you need with read_file and answer in two lines.",
          tools: [readFile],
          limits: { maxRounds: 4 },
        },
      },
    }),
  ],
  offline: { script: "script.json" },
});
