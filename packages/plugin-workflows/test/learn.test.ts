/**
 * Learning and matching as pure functions, fixture by fixture: what becomes a constant, a slot,
 * a value from an earlier result or a model parameter; when the gate offers, refuses and
 * calls a match ambiguous; how declines silence a workflow.
 */
import { describe, expect, it } from "vitest";
import type { Example, Workflow } from "../src/index.ts";
import { decide, fill, offerable, shapeOf, synthesise } from "../src/index.ts";

const ex = (
  input: string,
  calls: Example["calls"],
  results: string[] = [],
  answer = "done",
  lead?: string,
): Example => ({
  input,
  calls,
  results,
  answer,
  ...(lead ? { lead } : {}),
});

describe("shapeOf", () => {
  it("generalises letters, digits and separators with their length ranges", () => {
    expect(shapeOf(["mia_li_3668", "omar_davis_3817"])).toBe("[a-z]{1,8}_[a-z]{1,9}_[0-9]{4}");
    expect(shapeOf(["Z7GOZK", "JG7FMM"])).toBe("[A-Z0-9]{6,6}");
    expect(shapeOf(["2024-05-20", "2024-06-01"])).toBe("[0-9]{4}-[0-9]{2}-[0-9]{2}");
  });
  it("no shape for values of different structure or with no letter or digit", () => {
    expect(shapeOf(["abc", "123"])).toBeUndefined();
    expect(shapeOf(["--", "--"])).toBeUndefined();
  });
});

describe("synthesise", () => {
  const deploy = (svc: string, env: string) =>
    ex(
      `please deploy ${svc} to ${env} now`,
      [
        { name: "build", args: { service: svc, mode: "release" } },
        { name: "deploy", args: { artifact: `${svc}.tar`, env } },
      ],
      [JSON.stringify({ artifact: `${svc}.tar` }), "ok"],
    );

  it("constants, input slots in order, and a value from the first result by path", () => {
    const w = synthesise([deploy("api", "staging"), deploy("web", "production"), deploy("auth", "qa")])!;
    expect(w.steps).toEqual([
      { tool: "build", args: { service: { from: "input", slot: "p1" }, mode: { from: "const", value: "release" } } },
      {
        tool: "deploy",
        args: { artifact: { from: "step", step: 0, path: ["artifact"] }, env: { from: "input", slot: "p2" } },
      },
    ]);
    expect(w.cue).toEqual(["deploy"]);
    expect(w.modelParams).toEqual([]);
    expect(w.answer).toBe("done");
  });

  it("a varying value found nowhere becomes a model parameter", () => {
    const w = synthesise([
      ex("rotate the key", [{ name: "rotate", args: { id: "k1x9" } }]),
      ex("rotate the key", [{ name: "rotate", args: { id: "zz_77" } }]),
    ])!;
    expect(w.steps[0]!.args.id).toEqual({ from: "model", param: "step1.id" });
    expect(w.modelParams).toEqual(["step1.id"]);
  });

  it("examples that disagree in tools or argument keys, or share no word, teach nothing", () => {
    expect(synthesise([ex("a b", [{ name: "x", args: {} }]), ex("a b", [{ name: "y", args: {} }])])).toBeUndefined();
    expect(
      synthesise([ex("a b", [{ name: "x", args: { k: 1 } }]), ex("a b", [{ name: "x", args: { j: 1 } }])]),
    ).toBeUndefined();
    expect(
      synthesise([
        ex("look up aaa_bbb_1111", [{ name: "x", args: { u: "aaa_bbb_1111" } }]),
        ex("find cc_dd_2222", [{ name: "x", args: { u: "cc_dd_2222" } }]),
      ]),
    ).toBeUndefined();
  });
});

describe("decide", () => {
  const lookup = synthesise([
    ex(
      "check user mia_li_3668 reservation",
      [{ name: "get_user", args: { id: "mia_li_3668" } }],
      [],
      "ok",
      "Which user?",
    ),
    ex(
      "check user omar_davis_3817 reservation",
      [{ name: "get_user", args: { id: "omar_davis_3817" } }],
      [],
      "ok",
      "Which user?",
    ),
  ])!;
  const o = { minCue: 1 };

  it("fills the slot from an input with all cue words and the same lead", () => {
    const d = decide("check user noah_muller_9847 reservation please", [lookup], o, "Which user?");
    expect(d).toMatchObject({ kind: "match", match: { params: { p1: "noah_muller_9847" }, score: 1 } });
  });

  it("refuses without the lead's words, a cue word, or with two values where one slot takes one", () => {
    expect(decide("check user noah_muller_9847 reservation", [lookup], o, "Anything else?").kind).toBe("none");
    expect(decide("check noah_muller_9847 reservation", [lookup], o, "Which user?").kind).toBe("none");
    expect(decide("check user noah_muller_9847 and ana_li_1234 reservation", [lookup], o, "Which user?").kind).toBe(
      "none",
    );
    expect(fill(lookup, "no id here")).toBeUndefined();
  });

  it("two equally good workflows that differ are ambiguous: nothing is offered", () => {
    const other: Workflow = { ...lookup, id: "wf-other", steps: [{ tool: "cancel", args: {} }] };
    expect(decide("check user noah_muller_9847 reservation", [lookup, other], o, "Which user?")).toEqual({
      kind: "ambiguous",
      candidates: [lookup.id, "wf-other"],
    });
  });

  it("a very long input is not a workflow request", () => {
    expect(
      decide(`check user noah_muller_9847 reservation ${"x ".repeat(3000)}`, [lookup], o, "Which user?").kind,
    ).toBe("none");
  });
});

describe("offerable", () => {
  it("a workflow declined twice more than accepted is silenced", () => {
    expect(offerable({ accepted: 0, declined: 1 })).toBe(true);
    expect(offerable({ accepted: 0, declined: 2 })).toBe(false);
    expect(offerable({ accepted: 3, declined: 4 })).toBe(true);
    expect(offerable({ accepted: 3, declined: 5 })).toBe(false);
  });
});
