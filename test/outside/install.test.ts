/**
 * Keel outside this repository, the way the guide docs/outside.md says:
 * pack every package, `keel init` in an empty folder under the system's temp folder, run at once
 * (offline, before any install), install from the tarballs with real npm, run again with the
 * installed packages. One packing and one install are shared; no provider or protocol SDK comes
 * with Keel (issue 44): with a key but no @anthropic-ai/sdk, keel names the package at config
 * load, before any request. After it, issue 35's "done when"
 * runs in the same project with the installed packages, following the guide: `npm install
 * @ai-sdk/openai` (which must keep every Keel package) and an AI SDK model running a turn with a
 * tool, `keel serve` naming the protocol SDK it lacks, then (installed) `keel serve --mcp`
 * called by the MCP SDK's client, `keel serve --a2a` by @a2a-js/sdk's,
 * and the guide's server.mjs behind the chat-ui page (built with vite) in Chromium: text
 * streams, the approval waits through a SIGKILL restart of server.mjs and a reload of the page,
 * Approve runs the tool once. The model is the wire server (the test's, not the user's code).
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { randomUUID } from "node:crypto";
import { createServer as createNetServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { SendMessageRequest, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Page } from "playwright-core";
import { buildChatPage } from "../../examples/chat-ui/build-page.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserMissing, launchChromium } from "../../packages/cli/test/support/browser.ts";
import { echoResponder, startWireServer, type WireServer } from "../../packages/wire-server/src/index.ts";
import { publishable } from "../../scripts/pack.ts";
import {
  type OutsideProject,
  outsideProject,
  packInto,
  printed,
  REPO,
  type Ran,
  run as runIn,
  start,
  stop,
  stopAll,
  userEnv,
} from "./support/outside.ts";

const root = mkdtempSync(join(tmpdir(), "keel-outside-"));
let packed: { ran: Ran; tarballs: string[] };
let project: OutsideProject;
let installed: Ran | undefined;
let withAiSdk: Ran | undefined;
let withServeSdks: Ran | undefined;
let withAi: Ran | undefined;
let wire: WireServer;

beforeAll(async () => {
  wire = await startWireServer({ onEmpty: echoResponder });
  packed = await packInto(join(root, "packs"));
  mkdirSync(join(root, "my-agent"));
  project = outsideProject(join(root, "my-agent"));
}, 240_000);
afterAll(async () => {
  await stopAll();
  await wire?.close();
  rmSync(root, { recursive: true, force: true });
});

/** The guide "Outside this repository" (docs/outside.md), which the README links. */
function outsideGuide(): string {
  const guide = readFileSync(join(REPO, "docs/outside.md"), "utf8");
  expect(guide).toMatch(/^# Outside this repository\n/);
  return guide;
}

/**
 * The project's agent.config.ts once @ai-sdk/openai is installed: the guide's AI SDK model, its
 * provider pointed at the wire server; `get_weather` (info: runs) and `deploy` (exec: the
 * permissions plugin asks a person), which appends to deployments.log in the project.
 */
function aiSdkConfig(baseURL: string): string {
  return `import { appendFileSync } from "node:fs";
import { aiSdkModel } from "@keel/ai-sdk";
import { createOpenAI } from "@ai-sdk/openai";
import permissions from "@keel/plugin-permissions";

const openai = createOpenAI({ baseURL: ${JSON.stringify(baseURL)}, apiKey: "test" });

export default {
  name: "outside-agent",
  model: aiSdkModel(openai("gpt-4o")),
  plugins: [permissions()],
  tools: [
    {
      name: "get_weather", description: "Weather for a city.", category: "info",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      execute: ({ city }: { city: string }) => city + ": 21°C and sunny",
    },
    {
      name: "deploy", description: "Deploy a version.", category: "exec",
      parameters: { type: "object", properties: { version: { type: "string" } }, required: ["version"] },
      execute: ({ version }: { version: string }) => {
        appendFileSync("deployments.log", version + "\\n");
        return version + " is live";
      },
    },
  ],
};
`;
}

/** Every package.json under node_modules named `name` (nested copies included). */
function copiesOf(modules: string, name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const at = join(dir, entry);
      if (entry.startsWith("@")) walk(at);
      else if (existsSync(join(at, "package.json"))) {
        if (JSON.parse(readFileSync(join(at, "package.json"), "utf8")).name === name) found.push(at);
        if (existsSync(join(at, "node_modules"))) walk(join(at, "node_modules"));
      }
    }
  };
  walk(modules);
  return found;
}

/** A port nothing listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Record every text the assistant's paragraphs show, as they change (as examples/chat-ui's test does). */
async function watchAssistantText(page: Page): Promise<void> {
  await page.evaluate(() => {
    const w = globalThis as unknown as { seen: string[]; MutationObserver: any; document: any };
    w.seen = [];
    new w.MutationObserver(() => {
      for (const p of w.document.querySelectorAll(".assistant .text")) {
        const t = p.textContent as string;
        if (t && w.seen.at(-1) !== t) w.seen.push(t);
      }
    }).observe(w.document.body, { subtree: true, childList: true, characterData: true });
  });
}

/** What watchAssistantText recorded. */
function seenAssistantText(page: Page): Promise<string[]> {
  return page.evaluate(() => (globalThis as unknown as { seen: string[] }).seen);
}

describe("outside this repository", () => {
  it("pnpm pack:all makes one checked tarball per publishable package, none for private ones", () => {
    expect(packed.ran.code, packed.ran.stdout + packed.ran.stderr).toBe(0);
    expect(packed.ran.stdout).toMatch(/\d+ tarballs, checked/);
    const names = publishable().map((p) => p.name);
    expect(names).toContain("@keel/testkit");
    expect(names).not.toContain("@keel/wire-server");
    expect(packed.tarballs.map((t) => relative(join(root, "packs"), t)).sort()).toEqual(
      publishable()
        .map((p) => `${p.name.slice(1).replace("/", "-")}-${p.version}.tgz`)
        .sort(),
    );
  });

  it("the guide docs/outside.md, which the README links, shows the commands this file runs", () => {
    expect(readFileSync(join(REPO, "README.md"), "utf8")).toContain("](docs/outside.md)");
    const section = outsideGuide();
    for (const line of [
      "pnpm pack:all",
      "node $KEEL/packages/cli/bin/keel.js init",
      "node $KEEL/packages/cli/bin/keel.js run hello",
      "npm install $KEEL/packs/*.tgz",
      "npx keel run hello",
      "npm install @ai-sdk/openai",
      "npm install @modelcontextprotocol/sdk @a2a-js/sdk",
      "aiSdkModel(openai(",
      "npx keel serve --mcp",
      '["--no", "keel", "serve", "--mcp"]',
      "npx keel serve --a2a",
      "npm install ai",
      "node server.mjs",
      'createChatHandler({ agent, onDisconnect: "continue" })',
      "buildAgent(await loadConfig({ cwd: process.cwd() }))",
    ])
      expect(section).toContain(line);
  });

  it("keel init in an empty folder, then keel run hello at once: offline, before any install", async () => {
    const init = await project.checkoutKeel(["init"]);
    expect(init.code, init.stderr).toBe(0);
    expect(existsSync(join(project.dir, "node_modules"))).toBe(false);
    const run = await project.checkoutKeel(["run", "hello"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("hello");
    expect(run.stderr).toContain("offline");
    expect(existsSync(join(project.dir, ".keel", "memory.sqlite"))).toBe(true);
  });

  it("installs from the tarballs with npm, every @keel package from them and saved as file: specs, one kernel", async () => {
    expect(packed.tarballs.length).toBeGreaterThan(3);
    const manifest = JSON.parse(readFileSync(join(project.dir, "package.json"), "utf8"));
    // keel init writes registry ranges: the day the packages are published, `npm install` alone works.
    expect(manifest.dependencies["@keel/cli"]).toMatch(/^\^\d/);
    installed = await project.installFrom(packed.tarballs);
    expect(installed.code, installed.stdout + installed.stderr).toBe(0);
    // Saved: every Keel package by its tarball, so later installs neither prune them nor ask the registry.
    const saved = JSON.parse(readFileSync(join(project.dir, "package.json"), "utf8")).dependencies;
    for (const p of publishable()) expect(saved[p.name], p.name).toMatch(/^file:.*\.tgz$/);
    expect(saved.zod).toBe(manifest.dependencies.zod);
    const modules = join(project.dir, "node_modules");
    const lock = JSON.parse(readFileSync(join(modules, ".package-lock.json"), "utf8")) as {
      packages: Record<string, { resolved?: string }>;
    };
    const keel = Object.entries(lock.packages).filter(([at]) => /node_modules\/@keel\//.test(at));
    expect(keel.length).toBeGreaterThanOrEqual(packed.tarballs.length);
    for (const [at, entry] of keel) expect(entry.resolved, at).toMatch(/^file:/);
    expect(copiesOf(modules, "@keel/kernel")).toEqual([join(modules, "@keel", "kernel")]);
    // Real copies, not links back into this repository.
    expect(lstatSync(join(modules, "@keel", "cli")).isSymbolicLink()).toBe(false);
  }, 180_000);

  it("after the install, npx keel run hello works offline with the installed packages", async () => {
    expect(installed?.code).toBe(0);
    const bin = realpathSync(join(project.dir, "node_modules", ".bin", "keel"));
    expect(bin.startsWith(realpathSync(project.dir))).toBe(true);
    expect(bin.startsWith(REPO)).toBe(false);
    const run = await project.npxKeel(["run", "hello"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("You said: hello");
    // No provider SDK came with Keel: the offline note says what a real model needs.
    expect(run.stderr).toContain("Install its SDK (npm install @anthropic-ai/sdk) and set the API key");
    const inspect = await project.npxKeel(["inspect"]);
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stdout).toContain(join(project.dir, "agent.config.ts"));
    expect(inspect.stdout).toMatch(/@keel\/plugin-memory@\d/);
    expect(inspect.stdout).toMatch(/@keel\/plugin-skills@\d/);
  });

  it("with a key but without its SDK, keel refuses the config's model at load, naming the package to install, before any request", async () => {
    expect(installed?.code).toBe(0);
    const modules = join(project.dir, "node_modules");
    expect(copiesOf(modules, "@anthropic-ai/sdk")).toEqual([]);
    expect(copiesOf(modules, "openai")).toEqual([]);
    const from = wire.requests.length;
    const online = await runIn(
      "npx",
      ["--no", "keel", "run", "hello"],
      project.dir,
      userEnv({ ANTHROPIC_API_KEY: "test", ANTHROPIC_BASE_URL: wire.anthropicBaseURL }),
    );
    expect(online.code).toBe(2);
    expect(online.stderr).toContain("KEEL_PROVIDER_SDK_MISSING (at model)");
    expect(online.stderr).toContain(`${join(project.dir, "agent.config.ts")}: anthropic:claude-sonnet-4-6`);
    expect(online.stderr).toContain("run `npm install @anthropic-ai/sdk`");
    expect(online.stdout).toBe("");
    expect(wire.requests.length).toBe(from);
  });

  it("npm install @ai-sdk/openai keeps every Keel package; an AI SDK model runs a turn with a tool", async () => {
    expect(installed?.code).toBe(0);
    withAiSdk = await project.npmInstall(["@ai-sdk/openai"]);
    expect(withAiSdk.code, withAiSdk.stdout + withAiSdk.stderr).toBe(0);
    expect(withAiSdk.stdout).not.toMatch(/removed/);
    const modules = join(project.dir, "node_modules");
    for (const p of publishable()) expect(existsSync(join(modules, p.name, "package.json")), p.name).toBe(true);
    // An AI SDK model needs neither provider SDK: none was installed.
    expect(copiesOf(modules, "@anthropic-ai/sdk")).toEqual([]);
    expect(copiesOf(modules, "openai")).toEqual([]);
    writeFileSync(join(project.dir, "agent.config.ts"), aiSdkConfig(wire.openaiBaseURL));
    const from = wire.requests.length;
    wire.enqueue(
      { toolCalls: [{ name: "get_weather", args: { city: "Paris" } }], api: "responses" },
      { text: "Paris: sunny, 21°C.", api: "responses" },
    );
    const run = await project.npxKeel(["run", "weather in Paris?"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("keel: model openai.responses:gpt-4o");
    expect(run.stdout).toContain("Paris: sunny, 21°C.");
    const seen = wire.requests.slice(from);
    expect(seen.map((r) => [r.api, r.outcome])).toEqual([
      ["responses", "completed"],
      ["responses", "completed"],
    ]);
    // The tool ran in the project and its result went back to the model.
    expect(JSON.stringify(seen[1]!.body)).toContain("Paris: 21°C and sunny");
  }, 120_000);

  it("npx keel serve without its protocol's SDK names the package to install, before the agent is built; npm install adds them", async () => {
    expect(withAiSdk?.code).toBe(0);
    const modules = join(project.dir, "node_modules");
    for (const [flag, sdk] of [
      ["--mcp", "@modelcontextprotocol/sdk"],
      ["--a2a", "@a2a-js/sdk"],
    ] as const) {
      expect(copiesOf(modules, sdk), sdk).toEqual([]);
      const refused = await project.npxKeel(["serve", flag]);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain(`KEEL_PACKAGE_MISSING (at ${flag})`);
      expect(refused.stderr).toContain(`run \`npm install ${sdk}\``);
      expect(refused.stderr).not.toContain("keel: model");
    }
    withServeSdks = await project.npmInstall(["@modelcontextprotocol/sdk", "@a2a-js/sdk"]);
    expect(withServeSdks.code, withServeSdks.stdout + withServeSdks.stderr).toBe(0);
    expect(withServeSdks.stdout).not.toMatch(/removed/);
  }, 120_000);

  it("npx keel serve --mcp, called from another MCP client over stdio: ask, then continue with session_id", async () => {
    expect(withServeSdks?.code).toBe(0);
    const transport = new StdioClientTransport({
      command: "npx",
      args: ["--no", "keel", "serve", "--mcp"],
      cwd: project.dir,
      env: userEnv() as Record<string, string>,
      stderr: "pipe",
    });
    const client = new Client({ name: "another-client", version: "1.0.0" });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("ask");
      const first = (await client.callTool({ name: "ask", arguments: { input: "hello from MCP" } }))
        .structuredContent as {
        session_id: string;
        status: string;
        answer: string;
      };
      expect(first).toMatchObject({ status: "completed", answer: "You said: hello from MCP" });
      const from = wire.requests.length;
      const next = (
        await client.callTool({ name: "ask", arguments: { input: "and again", session_id: first.session_id } })
      ).structuredContent as { session_id: string; answer: string };
      expect(next).toMatchObject({ session_id: first.session_id, answer: "You said: and again" });
      // The same conversation: the model saw the first turn.
      expect(JSON.stringify(wire.requests[from]!.body)).toContain("hello from MCP");
    } finally {
      await client.close();
    }
  }, 60_000);

  it("npx keel serve --a2a, called from an A2A client: the agent card, message/send completes with the answer", async () => {
    expect(withServeSdks?.code).toBe(0);
    const server = project.startKeel(["serve", "--a2a"]);
    try {
      const url = (await printed(server, /A2A endpoint (\S+)/))[1]!;
      const client = await new ClientFactory().createFromUrl(url);
      expect((await client.getAgentCard()).name).toBe("outside-agent");
      const task = await client.sendMessage(
        SendMessageRequest.fromJSON({
          message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hello from A2A" }] },
        }),
      );
      if (!("status" in task)) throw new Error("expected a task");
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const answer = (task.status?.message?.parts ?? [])
        .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
        .join("");
      expect(answer).toBe("You said: hello from A2A");
    } finally {
      await stop(server, "SIGINT");
    }
  }, 60_000);

  it("the guide's server.mjs without ai stops at createChatHandler naming it, before it listens; npm install ai adds it", async () => {
    expect(withAiSdk?.code).toBe(0);
    const modules = join(project.dir, "node_modules");
    // No Keel package made the project install the UI protocols' libraries.
    for (const name of ["ai", "@ag-ui/core", "@ag-ui/encoder"]) expect(copiesOf(modules, name), name).toEqual([]);
    const snippet = /```js\n(\/\/ server\.mjs[\s\S]*?)```/.exec(outsideGuide())?.[1];
    expect(snippet, "the guide's server.mjs").toBeDefined();
    writeFileSync(join(project.dir, "server.mjs"), snippet!);
    const refused = await runIn(process.execPath, ["server.mjs"], project.dir, userEnv({ PORT: "0" }));
    expect(refused.code, refused.stderr).not.toBe(0);
    expect(refused.stderr).toContain("KEEL_PACKAGE_MISSING (at ai)");
    expect(refused.stderr).toContain("run `npm install ai`");
    expect(refused.stdout).not.toContain("useChat at");
    withAi = await project.npmInstall(["ai"]);
    expect(withAi.code, withAi.stdout + withAi.stderr).toBe(0);
    expect(withAi.stdout).not.toMatch(/removed/);
  }, 120_000);

  it.skipIf(browserMissing())(
    "the team's React app: useChat against the guide's server.mjs streams text; the approval waits through a SIGKILL restart and a reload; Approve runs the tool once",
    async () => {
      expect(withAi?.code).toBe(0);
      await buildChatPage(join(project.dir, "dist"));
      const snippet = /```js\n(\/\/ server\.mjs[\s\S]*?)```/.exec(outsideGuide())?.[1];
      expect(snippet, "the guide's server.mjs").toBeDefined();
      writeFileSync(join(project.dir, "server.mjs"), snippet!);
      // One port for both processes: the page's address stays the same through the restart.
      const port = await freePort();
      const serve = () => start(process.execPath, ["server.mjs"], project.dir, userEnv({ PORT: String(port) }));
      let server = serve();
      const browser = await launchChromium();
      try {
        const url = (await printed(server, /useChat at (\S+)/, "stdout"))[1]!;
        wire.enqueue({
          text: "Deploying v1.4.2 now, step by step.",
          chunks: 6,
          // Apart enough that a loaded machine still paints a part of the text before the rest.
          delayMs: 150,
          toolCalls: [{ name: "deploy", args: { version: "v1.4.2" } }],
          api: "responses",
        });
        const page = await browser.newPage();
        const failed: string[] = [];
        page.on("pageerror", (e) => failed.push(e.message));
        await page.goto(url);
        await watchAssistantText(page);
        const from = wire.requests.length;
        await page.getByLabel("Message").fill("please deploy v1.4.2");
        await page.getByRole("button", { name: "Send" }).click();
        const tool = page.locator('.tool[data-tool="deploy"]');
        await tool.locator("button", { hasText: "Approve" }).waitFor();
        expect(await tool.getAttribute("data-state")).toBe("approval-requested");
        await page.locator('#status[data-status="ready"]').waitFor();
        expect(existsSync(join(project.dir, "deployments.log"))).toBe(false);
        // Streamed: a prefix of the first answer was on screen before all of it.
        const seen = await seenAssistantText(page);
        const first = "Deploying v1.4.2 now, step by step.";
        expect(seen).toContain(first);
        expect(
          seen.some((t) => t !== first && first.startsWith(t)),
          JSON.stringify(seen),
        ).toBe(true);

        // The server dies with the approval waiting, and starts again; the page reloads.
        await stop(server, "SIGKILL");
        server = serve();
        expect((await printed(server, /useChat at (\S+)/, "stdout"))[1]).toBe(url);
        wire.enqueue({ text: "Done: v1.4.2 is live in production.", chunks: 6, delayMs: 40, api: "responses" });
        await page.reload();
        await tool.locator("button", { hasText: "Approve" }).waitFor();
        expect(await tool.getAttribute("data-state")).toBe("approval-requested");
        expect(await page.locator(".user", { hasText: "please deploy v1.4.2" }).count()).toBe(1);
        await tool.locator("button", { hasText: "Approve" }).click();
        await page.locator('.tool[data-state="output-available"]').waitFor();
        await page.locator(".assistant .text", { hasText: "Done: v1.4.2 is live in production." }).waitFor();
        await page.locator('#status[data-status="ready"]').waitFor();
        expect(await page.locator(".tool .output").textContent()).toContain("v1.4.2 is live");
        expect(await page.locator("p.error").count()).toBe(0);
        // The tool ran once, in the restarted process.
        expect(readFileSync(join(project.dir, "deployments.log"), "utf8")).toBe("v1.4.2\n");
        // The resumed turn sent the tool's result to the model.
        expect(wire.requests.slice(from).map((r) => r.outcome)).toEqual(["completed", "completed"]);
        expect(JSON.stringify(wire.requests[from + 1]!.body)).toContain("v1.4.2 is live");
        expect(failed).toEqual([]);
      } finally {
        await browser.close();
        await stop(server);
      }
    },
    180_000,
  );
});
