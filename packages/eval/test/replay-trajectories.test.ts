/**
 * The shared trajectories as recorded sessions replay identically with the same plugins (the
 * full run over all 262 is `pnpm bench replay-trajectories`); a subset here covers each source,
 * a result a plugin rewrote (replayed from its raw output) and one the log stores redacted.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { KeelEvent, KeelPlugin } from "@keel/kernel";
import compaction from "@keel/plugin-compaction";
import memory from "@keel/plugin-memory";
import skills from "@keel/plugin-skills";
import { findDataDir } from "../../../test/support/data.ts";
import {
  allTrajectories,
  recordTrajectory,
  replayTrajectory,
  scratchHome,
} from "../bench/support/trajectory-sessions.ts";
import type { Trajectory } from "../bench/support/trajectory-sessions.ts";

const data = findDataDir();
const skillsDir = join(import.meta.dirname, "..", "..", "..", "examples", "full-stack", "skills");
const withSkills = (): KeelPlugin[] => [memory({ namespace: "team" }), skills({ dirs: [skillsDir] }), compaction()];
const homes: Array<{ drop(): void }> = [];
afterAll(() => {
  for (const h of homes.splice(0)) h.drop();
});

function pick(all: Trajectory[]): Trajectory[] {
  const of = (source: string) => all.filter((t) => t.source === source);
  return [
    ...of("swe-agent").filter((t) => t.name.includes("crypto__eps") || t.name.includes("function_calling_simple")),
    ...of("mini-swe-agent").slice(0, 2),
    ...of("tau-bench").slice(0, 3),
  ];
}

async function roundTrip(t: Trajectory, replayPlugins = withSkills) {
  const a = scratchHome();
  const b = scratchHome();
  homes.push(a, b);
  const events: KeelEvent[] = await recordTrajectory(t, withSkills, a.home);
  return { events, report: await replayTrajectory(t, events, replayPlugins, b.home) };
}

describe.skipIf(!data)("replay of the shared trajectories", () => {
  const chosen = data ? pick(allTrajectories(data)) : [];

  it("each source replays identically with the same plugins", { timeout: 120_000 }, async () => {
    expect(chosen.length).toBe(7);
    let rewritten = 0;
    let redacted = 0;
    for (const t of chosen) {
      const { events, report } = await roundTrip(t);
      expect(
        report.identical,
        `${t.source} ${t.name}: ${JSON.stringify(report.requests[report.firstDivergence ?? 0])}`,
      ).toBe(true);
      expect(report.requests.length).toBeGreaterThan(1);
      rewritten += events.filter((e) => e.type === "tool.completed" && e.raw).length;
      redacted += events.filter(
        (e) => e.type === "message.appended" && JSON.stringify(e.message).includes("[REDACTED:"),
      ).length;
    }
    expect(rewritten).toBeGreaterThan(0);
    expect(redacted).toBeGreaterThan(0);
  });

  it("without the skills plugin the first request differs: its section is reported removed", {
    timeout: 60_000,
  }, async () => {
    const t = chosen.find((x) => x.source === "tau-bench")!;
    const { report } = await roundTrip(t, () => [memory({ namespace: "team" }), compaction()]);
    expect(report.identical).toBe(false);
    expect(report.firstDivergence).toBe(0);
    expect(report.requests[0]!.sections).toContainEqual(
      expect.objectContaining({ sectionId: "skills", change: "removed" }),
    );
  });
});
