import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const here = dirname(fileURLToPath(import.meta.url));
const home = mkdtempSync(join(tmpdir(), "keel-custom-plugin-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe("examples/custom-plugin", () => {
  it("keel run in the example's folder: the inline plugin adds its section and denies the delete", async () => {
    const run = await runKeel(["run", "--json", "Delete the retro note"], {
      cwd: here,
      env: offlineEnv({ KEEL_HOME: home }),
    });
    expect(run.code, run.stderr).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
    const compiled = events.find((e) => e.type === "prompt.compiled") as unknown as {
      manifest: { sections: Array<{ sectionId: string; plugins: string[] }> };
    };
    expect(compiled.manifest.sections).toEqual([
      {
        sectionId: "house_rules",
        title: "House rules",
        chars: expect.any(Number),
        plugins: ["house-rules"],
        hash: expect.any(String),
      },
    ]);
    const tools = events.filter((e) => e.type === "tool.completed").map((e) => [e.name, e.status, e.decision]);
    expect(tools).toEqual([
      ["read_note", "ok", undefined],
      ["delete_note", "denied", "deny by house-rules"],
    ]);
  });

  it("the same request with --allow-destructive lets the tool run", async () => {
    const run = await runKeel(["run", "--json", "Delete the retro note --allow-destructive"], {
      cwd: here,
      env: offlineEnv({ KEEL_HOME: home }),
    });
    const statuses = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; name?: string; status?: string })
      .filter((e) => e.type === "tool.completed")
      .map((e) => `${e.name}:${e.status}`);
    expect(statuses).toEqual(["read_note:ok", "delete_note:ok"]);
  });
});
