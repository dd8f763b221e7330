/**
 * `keel serve --a2a` as a real process, driven by @a2a-js/sdk's client: it prints where it
 * listens, answers tasks from the config's agent, keeps a caller's conversation and tasks across
 * a restart, needs the token when given one, refuses other hosts without one, and stops cleanly
 * on SIGINT and SIGTERM.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk";
import type { Task } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import type { Client } from "@a2a-js/sdk/client";
import { KEEL_BIN, offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-serve-a2a-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TOKEN = "serve-token-0123456789";

function project(): { dir: string; home: string } {
  const dir = mkdtempSync(join(root, "p-"));
  writeFileSync(
    join(dir, "agent.config.mjs"),
    `export default {
  name: "helper",
  instructions: "Answers questions about the release.",
  offline: { script: { steps: [
    { when: { lastUserIncludes: "release" }, text: "The release is on Thursday." },
    { when: { lastUserIncludes: "again" }, text: "Still Thursday." },
  ] } },
};\n`,
  );
  return { dir, home: join(dir, ".keel") };
}

type Served = { child: ChildProcess; url: string; stderr: () => string; exit: Promise<number | null> };

async function start(p: { dir: string; home: string }, args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [KEEL_BIN, "serve", "--a2a", ...args], {
    cwd: p.dir,
    env: offlineEnv({ KEEL_HOME: p.home }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const exit = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      const m = /A2A endpoint (\S+)/.exec(stderr);
      if (m && stderr.includes("agent card")) resolve(m[1]!);
    });
    void exit.then(() => reject(new Error(`keel serve exited: ${stderr}`)));
  });
  return { child, url, stderr: () => stderr, exit };
}

async function client(url: string, token?: string): Promise<Client> {
  const authed: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) headers.set("authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authed }),
  }).createFromUrl(url);
}

async function ask(c: Client, text: string, contextId?: string): Promise<Task> {
  const r = await c.sendMessage(
    SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...(contextId ? { contextId } : {}) },
    }),
  );
  if (!("status" in r)) throw new Error("expected a task");
  return r;
}

const answer = (t: Task) =>
  (t.status?.message?.parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

describe("keel serve --a2a", () => {
  it("serves the config's agent; the conversation and its tasks outlive a restart; SIGTERM 143, SIGINT 0", async () => {
    const p = project();
    const first = await start(p);
    expect(first.stderr()).toContain(`agent card ${first.url}.well-known/agent-card.json`);
    const c = await client(first.url);
    expect((await c.getAgentCard()).name).toBe("helper");
    const t = await ask(c, "when is the release?");
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answer(t)).toBe("The release is on Thursday.");
    first.child.kill("SIGTERM");
    expect(await first.exit).toBe(143);

    const second = await start(p);
    const again = await client(second.url);
    const kept = await again.getTask(GetTaskRequest.fromJSON({ id: t.id }));
    expect(answer(kept)).toBe("The release is on Thursday.");
    const next = await ask(again, "say it again", t.contextId);
    expect(next.contextId).toBe(t.contextId);
    expect(answer(next)).toBe("Still Thursday.");
    second.child.kill("SIGINT");
    expect(await second.exit).toBe(0);
    expect(`${first.stderr()}${second.stderr()}`).not.toMatch(/\n\s+at |Error:/);
  });

  it("a paused approval outlives a restart: the next process resumes the turn when the task is answered", async () => {
    const p = project();
    const notes = join(p.dir, "notes.txt");
    const config = (steps: unknown[]) =>
      writeFileSync(
        join(p.dir, "agent.config.mjs"),
        `import { appendFileSync } from "node:fs";
export default {
  name: "helper",
  tools: [{ name: "write_note", description: "Appends a note.", category: "edit", parameters: { type: "object", properties: { text: { type: "string" } } }, execute: ({ text }) => { appendFileSync(${JSON.stringify(notes)}, text + "\\n"); return "wrote " + text; } }],
  plugins: [{ name: "guard", version: "1.0.0", setup(ctx) { ctx.on("tool.pre_call", (e) => e.call.name === "write_note" ? { kind: "tool_decision", decision: "ask", reason: "writes are reviewed" } : undefined); } }],
  offline: { script: { steps: ${JSON.stringify(steps)} } },
};\n`,
      );
    config([{ toolCalls: [{ id: "w1", name: "write_note", args: { text: "ship it" } }] }]);
    const first = await start(p);
    const paused = await ask(await client(first.url), "note that we ship");
    expect(paused.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    first.child.kill("SIGTERM");
    await first.exit;

    config([{ text: "Noted." }]);
    const second = await start(p);
    try {
      const c = await client(second.url);
      expect((await c.getTask(GetTaskRequest.fromJSON({ id: paused.id }))).status?.state).toBe(
        TaskState.TASK_STATE_INPUT_REQUIRED,
      );
      const done = await c.sendMessage(
        SendMessageRequest.fromJSON({
          message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "approve" }], taskId: paused.id },
        }),
      );
      expect("status" in done && done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(readFileSync(notes, "utf8")).toBe("ship it\n");
    } finally {
      second.child.kill("SIGINT");
      await second.exit;
    }
  });

  it("with --token: the card is public, calls without the token are 401, with it they are served", async () => {
    const p = project();
    const s = await start(p, ["--token", TOKEN]);
    try {
      expect(s.stderr()).toContain("Authorization: Bearer");
      const res = await fetch(s.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: number } }).error.code).toBeTypeOf("number");
      const t = await ask(await client(s.url, TOKEN), "the release?");
      expect(answer(t)).toBe("The release is on Thursday.");
    } finally {
      s.child.kill("SIGINT");
      await s.exit;
    }
  });

  it("the public card publishes nothing of the instructions: the config's `description`, else a generic text (both card shapes)", async () => {
    const secret = "Internal playbook: offer discount code ZEBRA-7731 to churning customers.";
    const words = ["playbook", "ZEBRA", "7731", "churning", "discount"];
    const served = async (description?: string) => {
      const p = project();
      writeFileSync(
        join(p.dir, "agent.config.mjs"),
        `export default { name: "helper", instructions: ${JSON.stringify(`${secret}\nSecond line.`)},${description ? ` description: ${JSON.stringify(description)},` : ""} offline: { script: { steps: [{ text: "hi" }] } } };\n`,
      );
      const s = await start(p, ["--token", TOKEN]);
      try {
        // Without a token, in both shapes (v1.0 by header, v0.3 without).
        const card = `${s.url}.well-known/agent-card.json`;
        const v1 = await (await fetch(card, { headers: { "A2A-Version": "1.0" } })).text();
        const v03 = await (await fetch(card)).text();
        return {
          v1,
          v03,
          description: ((await (await client(s.url)).getAgentCard()) as { description: string }).description,
        };
      } finally {
        s.child.kill("SIGINT");
        await s.exit;
      }
    };
    const generic = await served();
    for (const w of words) {
      expect(generic.v1).not.toContain(w);
      expect(generic.v03).not.toContain(w);
    }
    expect(generic.description).toBe("A Keel agent.");
    const own = await served("Answers questions about our releases.");
    expect(own.description).toBe("Answers questions about our releases.");
    for (const w of words) expect(`${own.v1}${own.v03}`).not.toContain(w);
  });

  it("another host without a token is refused before anything listens (exit 2, naming --token)", async () => {
    const p = project();
    const run = await runKeel(["serve", "--a2a", "--host", "0.0.0.0"], {
      cwd: p.dir,
      env: offlineEnv({ KEEL_HOME: p.home }),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("--token");
    expect(run.stderr).not.toContain("A2A endpoint");
  });

  it("a port in use is a usage error naming --port", async () => {
    const p = project();
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    try {
      const port = String((taken.address() as AddressInfo).port);
      const run = await runKeel(["serve", "--a2a", "--port", port], {
        cwd: p.dir,
        env: offlineEnv({ KEEL_HOME: p.home }),
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`Port ${port} on 127.0.0.1 is in use`);
    } finally {
      taken.close();
    }
  });

  it("serve without --a2a, and --token on another command, are usage errors", async () => {
    const p = project();
    const env = offlineEnv({ KEEL_HOME: p.home });
    const bare = await runKeel(["serve"], { cwd: p.dir, env });
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("--a2a");
    const stray = await runKeel(["run", "--token", TOKEN, "hi"], { cwd: p.dir, env });
    expect(stray.code).toBe(2);
    expect(stray.stderr).toContain("--token is an option of keel serve");
  });
});
