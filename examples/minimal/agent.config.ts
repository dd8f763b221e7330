/**
 * The minimal agent as a config file: `keel run "…"` in this folder (or
 * `keel run --config examples/minimal/agent.config.ts "…"`) loads it. Offline (no API key)
 * the model replays script.json; with ANTHROPIC_API_KEY set it is the real model.
 */
import { defineConfig } from "@keel/agent";
import { listFiles, readFileTool, workspace } from "./agent.ts";

export default defineConfig({
  name: "minimal",
  model: "anthropic:claude-sonnet-4-6",
  instructions: "You are a concise assistant for a small software project.",
  tools: [listFiles, readFileTool],
  plugins: [workspace],
  offline: { script: "./script.json" },
});
