/**
 * `ai`, `@ag-ui/core` and `@ag-ui/encoder` are optional peers: importing @keel/ui-stream loads
 * none of them, and a project that lacks one gets KEEL_PACKAGE_MISSING naming it and the command
 * when the handler that needs it is created, before any request. The scenario is real: a copy of
 * this package's source in a project folder outside the repository whose node_modules holds its
 * Keel dependencies and zod but no peer, run by plain Node; then the same project with the peers
 * linked in, where the handlers are created and the lazily loaded packages do their work. The
 * AG-UI constants the mapper uses without loading @ag-ui/core are checked against the packages.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { EventType } from "@ag-ui/core";
import { AGUI_MEDIA_TYPE, EventEncoder } from "@ag-ui/encoder";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGUI_EVENT_TYPES, AGUI_PROTO_MEDIA_TYPE, aguiResponse } from "../src/ag-ui.ts";

const PACKAGE = join(import.meta.dirname, "..");
const root = mkdtempSync(join(tmpdir(), "keel-ui-peers-"));
const app = join(root, "app");

/** node_modules/<name> in the project → the copy this package resolves. */
function link(name: string): void {
  const target = realpathSync(join(PACKAGE, "node_modules", name));
  mkdirSync(dirname(join(app, "node_modules", name)), { recursive: true });
  symlinkSync(target, join(app, "node_modules", name));
}

beforeAll(() => {
  mkdirSync(join(app, "node_modules"), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // The package's source as a project would hold it (outside node_modules, so Node strips its types).
  cpSync(join(PACKAGE, "src"), join(app, "ui", "src"), { recursive: true });
  writeFileSync(join(app, "ui", "package.json"), JSON.stringify({ name: "ui-copy", type: "module" }));
  for (const name of ["@keel/kernel", "@keel/agent", "@keel/stream", "@keel/store-sqlite", "zod"]) link(name);
  writeFileSync(
    join(app, "load.ts"),
    `import { aguiResponse, chatMessages, createAGUIHandler, createChatHandler } from "./ui/src/index.ts";
const out: Record<string, unknown> = {};
const turn = (async function* () {
  yield { type: "text", delta: "hi", round: 1 };
})() as never;
// A session whose log holds one turn: a user message and the assistant's text.
const session = {
  id: "s1",
  flush: async () => {},
  agent: { store: { events: async () => [
    { type: "turn.started", seq: 1, turnId: "t1", trigger: "user", input: "hello" },
    { type: "message.appended", seq: 2, turnId: "t1", message: { role: "assistant", content: [{ type: "text", text: "hi there" }] } },
  ] } },
} as never;
const attempts: Array<[string, () => unknown]> = [
  ["createChatHandler", () => createChatHandler({ agent: {} as never, chats: "memory" })],
  ["chatMessages", async () => JSON.stringify(await chatMessages(session))],
  ["createAGUIHandler", () => createAGUIHandler({ agent: {} as never, chats: "memory" })],
  ["aguiResponse", async () => (await aguiResponse(turn, { threadId: "th", runId: "r1" }).text()).split("\\n")[0]],
];
for (const [name, attempt] of attempts) {
  try {
    const value = await attempt();
    out[name] = typeof value === "string" ? value : "created";
  } catch (err) {
    const e = err as { code?: string; message: string; location?: { path?: string } };
    out[name] = { code: e.code, message: e.message, path: e.location?.path };
  }
}
process.stdout.write(JSON.stringify(out));
`,
  );
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Outcome = string | { code?: string; message: string; path?: string };

function loadInProject(): Record<"createChatHandler" | "chatMessages" | "createAGUIHandler" | "aguiResponse", Outcome> {
  const r = spawnSync(process.execPath, ["load.ts"], {
    cwd: app,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", NODE_OPTIONS: "" },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe("a project without ui-stream's optional peers", () => {
  it("imports the package, and each handler names the package it needs and how to add it when created", () => {
    const out = loadInProject();
    for (const name of ["createChatHandler", "chatMessages"] as const) {
      expect(out[name], name).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "ai" });
      expect((out[name] as { message: string }).message, name).toContain(
        "needs the package ai, which is not installed in this project: run `npm install ai`",
      );
    }
    expect((out.createChatHandler as { message: string }).message).toContain(
      "A useChat endpoint (createChatHandler) needs",
    );
    for (const name of ["createAGUIHandler", "aguiResponse"] as const) {
      expect(out[name], name).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "@ag-ui/core" });
      expect((out[name] as { message: string }).message, name).toContain("run `npm install @ag-ui/core`");
    }
  });

  it("with only @ag-ui/core, the AG-UI side names @ag-ui/encoder; with every peer, all work", () => {
    link("@ag-ui/core");
    let out = loadInProject();
    expect(out.createAGUIHandler).toMatchObject({ code: "KEEL_PACKAGE_MISSING", path: "@ag-ui/encoder" });
    expect(out.createChatHandler).toMatchObject({ path: "ai" });
    link("@ag-ui/encoder");
    link("ai");
    out = loadInProject();
    expect(out.createChatHandler).toBe("created");
    expect(out.createAGUIHandler).toBe("created");
    // The AI SDK's reader, loaded on first use, built the reloaded chat.
    expect(JSON.parse(out.chatMessages as string)).toMatchObject([
      { role: "user", parts: [{ type: "text", text: "hello" }] },
      {
        id: "keel-t1",
        role: "assistant",
        parts: expect.arrayContaining([expect.objectContaining({ text: "hi there" })]),
      },
    ]);
    // The encoder, loaded on first use, wrote the run's first event.
    expect(out.aguiResponse).toBe('data: {"type":"RUN_STARTED","threadId":"th","runId":"r1"}');
  });
});

describe("the AG-UI constants the package holds without loading @ag-ui", () => {
  it("are @ag-ui/core's event types and @ag-ui/encoder's media type and content types", async () => {
    for (const [key, value] of Object.entries(AGUI_EVENT_TYPES))
      expect(EventType[key as keyof typeof EventType], key).toBe(value);
    expect(AGUI_PROTO_MEDIA_TYPE).toBe(AGUI_MEDIA_TYPE);
    const empty = (async function* () {})();
    for (const accept of [null, "*/*", "text/event-stream", AGUI_MEDIA_TYPE]) {
      const encoder = new EventEncoder(accept?.includes(AGUI_MEDIA_TYPE) ? { accept } : {});
      const response = aguiResponse(empty, { threadId: "t", runId: "r", accept });
      expect(response.headers.get("content-type"), String(accept)).toBe(encoder.getContentType());
      await response.body?.cancel();
    }
  });
});
