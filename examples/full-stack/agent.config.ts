/**
 * Every plugin in one agent: durable memory, SKILL.md routing, an MCP filesystem server over
 * stdio (its tools curated per request) and context compaction. Offline (no API key) the
 * model replays script.json, which holds two conversations: one that stores a fact and reads
 * the project through MCP, and one, in a later process, that needs the stored fact.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "@keel/agent";
import compaction from "@keel/plugin-compaction";
import mcp from "@keel/plugin-mcp";
import memory from "@keel/plugin-memory";
import skills from "@keel/plugin-skills";

const here = dirname(fileURLToPath(import.meta.url));
const project = join(here, "project");
const filesystemServer = createRequire(import.meta.url).resolve(
  "@modelcontextprotocol/server-filesystem/dist/index.js",
);

export default defineConfig({
  name: "full-stack",
  model: "anthropic:claude-sonnet-4-6",
  instructions: "You are the assistant of a small software team. Be brief and concrete.",
  plugins: [
    memory({ namespace: "team" }),
    skills({ dirs: [join(here, "skills")] }),
    mcp({
      topK: 5,
      servers: {
        fs: {
          command: process.execPath,
          args: [filesystemServer, project],
          cwd: project,
          description: "The team's project folder",
        },
      },
    }),
    compaction(),
  ],
  offline: { script: "./script.json" },
});
