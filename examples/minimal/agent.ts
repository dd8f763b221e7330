/**
 * The minimal agent: two read-only tools confined to ./project, and one plugin that tells
 * the model where it is working. Used by main.ts and by the example's test.
 */
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import { ScriptedProvider } from "@keel/testkit";
import type { AgentOptions, ModelProvider } from "@keel/agent";

const here = dirname(fileURLToPath(import.meta.url));
export const projectDir = join(here, "project");

function inside(path: string): string {
  const full = resolve(projectDir, path);
  if (relative(projectDir, full).startsWith("..")) throw new Error(`"${path}" is outside the project folder.`);
  return full;
}

export const listFiles = defineTool({
  name: "list_files",
  description: "List the files of the project folder.",
  input: z.object({}),
  category: "info",
  execute: async () => (await readdir(projectDir)).sort().join("\n"),
});

export const readFileTool = defineTool({
  name: "read_file",
  description: "Read a text file of the project folder.",
  input: z.object({ path: z.string().describe("Path relative to the project folder") }),
  category: "info",
  execute: async ({ path }) => readFile(inside(path), "utf8"),
});

/** A plugin: puts the working folder into the prompt context every turn. */
export const workspace = definePlugin({
  name: "workspace-context",
  version: "1.0.0",
  kernel: "^1",
  options: z.object({ label: z.string().default("project") }),
  input: { label: "demo project" },
  setup(ctx) {
    ctx.on("turn.pre_prompt_context", () => ({
      kind: "prompt_context",
      id: "workspace",
      domain: "workspace",
      content: `You are working in the ${ctx.options.label}. Use list_files and read_file to look at it.`,
    }));
  },
});

/** Build the example agent. Contract: offline unless a real provider is passed in. */
export async function buildAgent(options: { provider?: ModelProvider; home: string; store?: AgentOptions["store"] }) {
  return createAgent({
    name: "minimal",
    provider: options.provider ?? ScriptedProvider.fromFile(join(here, "script.json")),
    instructions: "You are a concise assistant for a small software project.",
    tools: [listFiles, readFileTool],
    plugins: [workspace],
    home: options.home,
    ...(options.store ? { store: options.store } : {}),
  });
}
