/** The files `keel init` writes: an agent project, or a plugin package. Plain strings, one function each. */

/** Versions the scaffolds depend on. */
export interface Versions {
  cli: string;
  kernel: string;
  plugins: string;
  /** The `packs/` folder of the Keel checkout this CLI runs from, if it runs from one. */
  packs?: string;
}

const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

/**
 * Where Keel's packages are installed from today: the `@keel` packages are not on npm yet (a
 * plain `npm install` of a scaffold answers 404), so from the tarballs `pnpm pack:all` makes in
 * a Keel checkout (`packs`, when this CLI runs from one; else a placeholder), every one of them,
 * so their own `@keel` dependencies come from the tarballs too (docs/outside.md, "Outside this
 * repository"). Contract: one shell line, without a comment.
 */
export function installCommand(packs: string | undefined, dev = false): string {
  return `npm install${dev ? " -D" : ""} ${packs ? `${shellPath(packs)}/*.tgz` : "<keel checkout>/packs/*.tgz"}`;
}

/** What a scaffold's README says about installing. */
function installNote(packs: string | undefined): string {
  return `Keel's \`@keel\` packages are not on npm yet: install them from the tarballs \`pnpm pack:all\`
makes in a Keel checkout (${packs ? `here, \`${packs}\`` : "its `packs/` folder"}); once they are published, a plain \`npm install\` does.`;
}

/** `p` as one shell word (a glob after it still expands). */
function shellPath(p: string): string {
  return /^[\w@%+=:,./-]+$/u.test(p) ? p : `'${p.replaceAll("'", `'\\''`)}'`;
}

/** An agent project that runs offline at once (echo model) and online once a key is set. */
export function agentProject(name: string, v: Versions): Record<string, string> {
  return {
    "package.json": json({
      name,
      version: "0.1.0",
      private: true,
      type: "module",
      engines: { node: ">=22.13" },
      scripts: { chat: "keel chat", ask: "keel run", inspect: "keel inspect" },
      dependencies: {
        "@keel/cli": `^${v.cli}`,
        "@keel/agent": `^${v.kernel}`,
        "@keel/kernel": `^${v.kernel}`,
        "@keel/plugin-memory": `^${v.plugins}`,
        "@keel/plugin-skills": `^${v.plugins}`,
        zod: "^4.1.0",
      },
    }),
    "agent.config.ts": `import { defineConfig } from "@keel/agent";
import memory from "@keel/plugin-memory";
import skills from "@keel/plugin-skills";

export default defineConfig({
  name: ${JSON.stringify(name)},
  // Without ANTHROPIC_API_KEY the agent runs offline on an echo model and says so;
  // with it, \`npm install @anthropic-ai/sdk\` first (Keel installs no provider SDK itself).
  model: "anthropic:claude-sonnet-4-6",
  instructions: "You are a helpful assistant for this project. Be brief and concrete.",
  // Sessions, memories and skill statistics live here (gitignored), not in ~/.keel.
  home: ".keel",
  plugins: [
    memory(),
    skills({ dirs: ["./skills"] }),
  ],
});
`,
    "skills/write-a-summary/SKILL.md": `---
name: write-a-summary
description: Summarise a document, a thread or a change - the point first, then what was decided and what is open.
---
# Write a summary

Lead with the point in one sentence. Then list what was decided, what is still open and who
owns each open item. Quote numbers exactly; never invent an owner or a date.
`,
    ".gitignore": "node_modules/\n.keel/\ndist/\n",
    "README.md": `# ${name}

A Keel agent. Offline (no API key) it answers with an echo model, so everything can be tried
at once. To talk to a real model, install its SDK and set its key: \`npm install @anthropic-ai/sdk\`
and \`ANTHROPIC_API_KEY\` for the \`anthropic:\` model in \`agent.config.ts\` (\`npm install openai\` and
\`OPENAI_API_KEY\` for an \`openai:\` one, or an AI SDK model through \`@keel/ai-sdk\`). Keel installs
no provider SDK itself: the project has the one it uses.

${installNote(v.packs)}

\`\`\`sh
${installCommand(v.packs)}
npx keel run "hello"           # one turn
npx keel chat                  # a conversation; -c continues the last session
npx keel inspect               # which plugin runs where
\`\`\`

- \`agent.config.ts\`: the model, the instructions and the plugins (memory, skills).
- \`skills/\`: one folder per skill, each with a SKILL.md; the skills plugin routes to them.
- \`.keel/\`: sessions and plugin databases (not committed).

Write a plugin of your own: \`npx keel init --plugin my-plugin\` in another folder.
`,
  };
}

/** A plugin package: a factory, a test that drives it through the scripted provider, a build. */
export function pluginPackage(name: string, v: Versions): Record<string, string> {
  const ident =
    name
      .replace(/^@[^/]+\//, "")
      .replace(/[^a-zA-Z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ""))
      .replace(/^[^a-zA-Z_$]+/, "") || "plugin";
  return {
    "package.json": json({
      name,
      version: "0.1.0",
      description: "A Keel plugin",
      type: "module",
      license: "MIT",
      engines: { node: ">=22.13" },
      exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" } },
      files: ["dist"],
      keywords: ["keel", "keel-plugin"],
      scripts: { build: "tsc -p tsconfig.json", test: "vitest run", prepublishOnly: "npm run build && npm test" },
      peerDependencies: { "@keel/kernel": `^${v.kernel}`, zod: "^4.1.0" },
      devDependencies: {
        "@keel/agent": `^${v.kernel}`,
        "@keel/kernel": `^${v.kernel}`,
        "@keel/testkit": `^${v.plugins}`,
        zod: "^4.1.0",
        vitest: "^4.0.0",
        typescript: "~5.9.0",
        "@types/node": "^24.0.0",
      },
    }),
    "tsconfig.json": json({
      compilerOptions: {
        target: "ES2023",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        declaration: true,
        outDir: "dist",
        rootDir: "src",
        skipLibCheck: true,
        allowImportingTsExtensions: true,
        rewriteRelativeImportExtensions: true,
      },
      include: ["src"],
    }),
    "src/index.ts": `import { definePlugin } from "@keel/kernel";
import { z } from "zod";

/** The plugin's options, validated before setup runs (a bad value is reported at plugins[i].options). */
export const Options = z.object({
  rule: z.string().min(1).default("Answer in plain English; say when you are unsure."),
});

/** Adds a house rule to every system prompt. */
export default function ${ident}(input?: z.input<typeof Options>) {
  return definePlugin({
    name: ${JSON.stringify(name)},
    version: "0.1.0",
    kernel: "^${v.kernel.split(".")[0]}",
    options: Options,
    input,
    setup(ctx) {
      // turn.pre_prompt_compile accepts prompt_section contributions: see the contributions reference.
      ctx.on("turn.pre_prompt_compile", () => ({
        kind: "prompt_section",
        id: ${JSON.stringify(`${name}:rule`)},
        sectionId: "house-rules",
        domain: "style",
        title: "House rules",
        content: ctx.options.rule,
      }));
    },
  });
}
`,
    "test/plugin.test.ts": `import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { describe, expect, it } from "vitest";
import ${ident} from "../src/index.ts";

describe(${JSON.stringify(name)}, () => {
  it("puts its rule in the system prompt the model is sent, with no warning", async () => {
    const provider = scriptedProvider([{ text: "Bonjour !" }]);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [${ident}({ rule: "Always answer in French." })] });
    const session = await agent.session();
    const result = await session.run("hello");
    const events = await session.events();
    await agent.close();

    expect(result.verdict.status).toBe("completed");
    expect(provider.requests[0]?.system).toContain("Always answer in French.");
    // A rejected contribution or a failing handler is a warning diagnostic: none here.
    expect(events.filter((e) => e.type === "diagnostic" && e.level !== "info")).toEqual([]);
  });

  it("rejects a bad option before the agent starts", async () => {
    await expect(createAgent({ provider: scriptedProvider([]), store: new MemorySessionStore(), plugins: [${ident}({ rule: "" })] })).rejects.toThrow(/options/);
  });
});
`,
    ".gitignore": "node_modules/\ndist/\n",
    "README.md": `# ${name}

A Keel plugin: it adds a house rule to every system prompt.

\`\`\`ts
// agent.config.ts
import { defineConfig } from "@keel/agent";
import ${ident} from ${JSON.stringify(name)};

export default defineConfig({ plugins: [${ident}({ rule: "Always answer in French." })] });
\`\`\`

${installNote(v.packs)}

\`\`\`sh
${installCommand(v.packs, true)}
npm test        # drives the plugin through Keel's scripted provider
npm run build   # dist/ is what npm users get
\`\`\`

Try it in an agent with \`keel run --strict\` (or \`KEEL_STRICT=1\`): any contribution the
kernel rejects then fails the command, so a broken plugin fails CI.
`,
  };
}
