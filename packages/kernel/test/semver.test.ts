import { describe, expect, it } from "vitest";
import { satisfies } from "../src/index.ts";
import { validRange } from "../src/semver.ts";

/** Assert `range` accepts exactly the `yes` versions and rejects the `no` versions. */
function check(range: string, yes: readonly string[], no: readonly string[]): void {
  for (const v of yes) expect(satisfies(v, range), `${v} should satisfy "${range}"`).toBe(true);
  for (const v of no) expect(satisfies(v, range), `${v} should not satisfy "${range}"`).toBe(false);
}

describe("satisfies: exact versions", () => {
  it("a full version matches only itself", () => {
    check("1.2.3", ["1.2.3"], ["1.2.4", "1.2.2", "1.3.3", "2.2.3", "0.2.3"]);
  });

  it("`=` and a leading `v` mean the same exact version", () => {
    check("=1.2.3", ["1.2.3", "v1.2.3"], ["1.2.4"]);
    check("v1.2.3", ["1.2.3"], ["1.2.4"]);
  });

  it("a partial version is a wildcard on the missing parts", () => {
    check("1.2", ["1.2.0", "1.2.99"], ["1.1.9", "1.3.0", "2.2.0"]);
    check("1", ["1.0.0", "1.99.99"], ["0.9.9", "2.0.0"]);
  });
});

describe("satisfies: x and * wildcards", () => {
  it("`*`, `x`, `X` and the empty range accept every valid version", () => {
    for (const r of ["*", "x", "X", ""]) check(r, ["0.0.0", "1.0.0", "99.5.3"], []);
  });

  it("`1.x` and `1.*` fix the major", () => {
    check("1.x", ["1.0.0", "1.9.9"], ["0.9.9", "2.0.0"]);
    check("1.*", ["1.0.0", "1.9.9"], ["2.0.0"]);
    check("1.x.x", ["1.4.2"], ["2.0.0"]);
  });

  it("`1.2.x` fixes major and minor", () => {
    check("1.2.x", ["1.2.0", "1.2.7"], ["1.3.0", "1.1.9"]);
  });
});

describe("satisfies: caret ranges", () => {
  it("^1.2.3 allows minor and patch updates below the next major", () => {
    check("^1.2.3", ["1.2.3", "1.2.4", "1.9.0"], ["1.2.2", "2.0.0", "0.9.9"]);
  });

  it("^1 and ^1.2 are major-locked from their floor", () => {
    check("^1", ["1.0.0", "1.99.0"], ["0.99.0", "2.0.0"]);
    check("^1.2", ["1.2.0", "1.5.0"], ["1.1.9", "2.0.0"]);
  });

  it("^0.x is minor-locked", () => {
    check("^0.2.3", ["0.2.3", "0.2.9"], ["0.2.2", "0.3.0", "1.0.0"]);
    check("^0.2", ["0.2.0", "0.2.9"], ["0.3.0", "0.1.9"]);
  });

  it("^0.0.x is patch-locked", () => {
    check("^0.0.3", ["0.0.3"], ["0.0.4", "0.0.2", "0.1.0"]);
  });

  it("^0 and ^0.0 follow the partial-version rules", () => {
    check("^0", ["0.0.0", "0.9.9"], ["1.0.0"]);
    check("^0.0", ["0.0.0", "0.0.9"], ["0.1.0"]);
  });

  it("the kernel's own version against typical plugin ranges", () => {
    expect(satisfies("1.0.0", "^1")).toBe(true);
    expect(satisfies("1.0.0", "^1.0.0")).toBe(true);
    expect(satisfies("1.0.0", "^2")).toBe(false);
    expect(satisfies("1.0.0", "^1.1")).toBe(false);
  });
});

describe("satisfies: tilde ranges", () => {
  it("~1.2.3 allows patch updates only", () => {
    check("~1.2.3", ["1.2.3", "1.2.9"], ["1.2.2", "1.3.0", "2.0.0"]);
  });

  it("~1.2 is minor-locked and ~1 is major-locked", () => {
    check("~1.2", ["1.2.0", "1.2.5"], ["1.3.0", "1.1.0"]);
    check("~1", ["1.0.0", "1.8.0"], ["2.0.0", "0.9.0"]);
  });

  it("~0.2.3 stays within 0.2", () => {
    check("~0.2.3", ["0.2.3", "0.2.4"], ["0.3.0", "0.2.2"]);
  });
});

describe("satisfies: comparators and comparator sets", () => {
  it("single comparators", () => {
    check(">=1.2.0", ["1.2.0", "5.0.0"], ["1.1.9"]);
    check(">1.2.0", ["1.2.1", "2.0.0"], ["1.2.0", "1.0.0"]);
    check("<2.0.0", ["1.99.99", "0.0.1"], ["2.0.0", "2.0.1"]);
    check("<=2.0.0", ["2.0.0", "1.0.0"], ["2.0.1"]);
  });

  it("comparators with partial versions round the way npm does", () => {
    check(">1.2", ["1.3.0"], ["1.2.0", "1.2.9"]);
    check("<=1.2", ["1.2.0", "1.2.9"], ["1.3.0"]);
    check("<2", ["1.99.99"], ["2.0.0"]);
    check(">=2", ["2.0.0"], ["1.99.99"]);
  });

  it("a space-separated set must satisfy every comparator", () => {
    check(">=1.2.0 <2", ["1.2.0", "1.9.9"], ["1.1.9", "2.0.0", "2.1.0"]);
    check(">1.0.0 <=1.0.5", ["1.0.1", "1.0.5"], ["1.0.0", "1.0.6"]);
    check("^1.2.0 <1.5.0", ["1.4.9"], ["1.5.0", "1.1.0"]);
  });

  it("an impossible set matches nothing", () => {
    check(">=2 <1", [], ["0.5.0", "1.5.0", "2.0.0"]);
  });
});

describe("satisfies: || alternatives", () => {
  it("any alternative may match", () => {
    check("^1 || ^3", ["1.0.0", "1.5.0", "3.0.0", "3.2.1"], ["2.0.0", "4.0.0", "0.9.0"]);
  });

  it("alternatives may be comparator sets or wildcards", () => {
    check(">=1.0.0 <1.2.0 || 2.x || 3.1.4", ["1.1.0", "2.5.0", "3.1.4"], ["1.2.0", "3.1.5", "0.1.0"]);
  });

  it("an empty alternative matches everything, like `*`", () => {
    check("^5 || ", ["1.0.0", "5.1.0"], []);
  });
});

describe("satisfies: pre-release tags and build metadata are ignored", () => {
  it("on the version", () => {
    expect(satisfies("1.2.3-beta.1", "^1.2.3")).toBe(true);
    expect(satisfies("1.2.3-rc.1", "1.2.3")).toBe(true);
    expect(satisfies("1.2.3+build.7", "1.2.3")).toBe(true);
    // The numeric part still decides.
    expect(satisfies("2.0.0-rc.1", "^1")).toBe(false);
    expect(satisfies("1.2.2-beta", "^1.2.3")).toBe(false);
  });

  it("on the range", () => {
    expect(satisfies("1.2.3", "^1.2.3-alpha.0")).toBe(true);
    expect(satisfies("1.5.0", ">=1.2.3-alpha <2.0.0-0")).toBe(true);
    expect(satisfies("1.2.2", "^1.2.3-alpha.0")).toBe(false);
  });
});

describe("satisfies: malformed input never satisfies", () => {
  it("malformed versions", () => {
    for (const v of ["", "abc", "1", "1.2", "1.2.x", "*", "1.2.3.4", "01.x.2a", "one.two.three", "1..3", "^1.2.3", ">=1.0.0"]) {
      expect(satisfies(v, "*"), `version ${JSON.stringify(v)}`).toBe(false);
    }
  });

  it("malformed ranges", () => {
    for (const r of ["banana", "^^1", ">=>1", "1.2.3.4", "^1 || nope", ">=1.0.0 <two", "~>1.2", "1.2.3 - x", "!1.0.0"]) {
      expect(satisfies("1.2.3", r), `range ${JSON.stringify(r)}`).toBe(false);
      expect(validRange(r), `validRange(${JSON.stringify(r)})`).toBe(false);
    }
  });

  it("non-string input (from untyped plugin metadata) is malformed, not a crash", () => {
    expect(satisfies("1.0.0", 1 as unknown as string)).toBe(false);
    expect(satisfies(1 as unknown as string, "*")).toBe(false);
    expect(satisfies("1.0.0", undefined as unknown as string)).toBe(false);
    expect(validRange(null as unknown as string)).toBe(false);
  });

  it("well-formed ranges are recognised by validRange", () => {
    for (const r of ["*", "", "1.2.3", "^1", "~0.2.3", ">=1.2.0 <2", "^1 || ^3", "1.x", "v1.2.3", "^1.2.3-beta"]) {
      expect(validRange(r), r).toBe(true);
    }
  });
});

describe("operators followed by a space", () => {
  it("reads `>= 1.2.0 < 2` like `>=1.2.0 <2`, as npm does", () => {
    expect(satisfies("1.5.0", ">= 1.2.0 < 2")).toBe(true);
    expect(satisfies("2.0.0", ">= 1.2.0 < 2")).toBe(false);
    expect(satisfies("1.0.0", "^ 1")).toBe(true);
    expect(validRange(">= 1.2.0")).toBe(true);
  });
});
