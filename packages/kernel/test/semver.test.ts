/**
 * The kernel's own semver (src/semver.ts) against npm's `semver`, the package it replaces: every range of the
 * table below, valid or not, is read the same way, and every version of the table satisfies it or not the same way.
 */
import { describe, expect, it } from "vitest";
// npm's semver is only a devDependency of the kernel now: the reference here, never imported by src/.
import npmSatisfies from "semver/functions/satisfies.js";
import npmValidRange from "semver/ranges/valid.js";
import { satisfies, validRange } from "../src/semver.ts";

/**
 * What the registry asked of npm's semver before the kernel dropped it: non-strings are no range and no version,
 * and a range must be valid the default way (npm's satisfies alone, with `includePrerelease`, would also accept
 * a hyphen range ending in `=1.2.3`, which validRange rejects).
 */
const reference = {
  validRange: (range: unknown): range is string => typeof range === "string" && npmValidRange(range) !== null,
  satisfies: (version: unknown, range: unknown) =>
    typeof version === "string" &&
    reference.validRange(range) &&
    npmSatisfies(version, range, { includePrerelease: true }),
};

/** 250 characters: `1.2.3-` and these are the longest version npm reads (256). */
const A250 = "a".repeat(250);

const VERSIONS: unknown[] = [
  ...["0.0.0-0", "0.0.0", "0.0.1", "0.0.2-rc.1", "0.0.2", "0.0.3", "0.1.0-alpha", "0.1.0", "0.1.5", "0.2.0-0", "0.2.0"],
  ...["1.0.0-0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1"],
  ...["1.0.0", "1.0.0+build.7", "1.0.0-x.7.z.92", "1.0.0-0A.is.legal", "1.0.0--", "1.2.2", "1.2.3-0", "1.2.3-alpha"],
  ...["1.2.3-rc.1", "1.2.3-rc.1+b.1", "1.2.3-rc.2", "1.2.3-rc.10", "1.2.3", "v1.2.3", " 1.2.3\t", "1.2.3+sha.1"],
  ...["1.2.4-0", "1.2.4", "1.3.0-beta", "1.3.0", "1.9.9", "2.0.0-0", "2.0.0-rc.1", "2.0.0", "2.3.4-rc", "2.3.4"],
  ...["2.3.5-0", "2.3.5", "2.5.0", "3.0.0-alpha", "3.0.0", "10.20.30", "9007199254740991.0.0"],
  // Not versions: npm reads none of these in strict mode.
  ...["1.2", "1", "=1.2.3", "V1.2.3", "01.2.3", "1.02.3", "1.2.3.4", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.3-a..b"],
  ...["", " ", "latest", "x", "9007199254740992.0.0", `1.2.3-${A250}`, `1.2.3-${A250}a`, `v1.2.3-${A250}`],
  ...[1, null, undefined, {}, ["1.2.3"], true],
];

const RANGES: Record<string, unknown[]> = {
  exact: ["1.2.3", "v1.2.3", "=1.2.3", "=v1.2.3", "1.2.3-rc.1", "1.2.3-rc.1+build", "1.2.3+build", "1.0.0-0A.is.legal"],
  "exact, miswritten": ["==1.2.3", "vv1.2.3", "v=1.2.3", "V1.2.3", "v 1.2.3", "= v1.2.3", "1.2.3+", "1.2.3-rc+"],
  comparators: [
    ...["<1.2.3", "<=1.2.3", ">1.2.3", ">=1.2.3", ">=1.2.3-rc.1", "<1.2.3-rc.2", "<2.0.0-0", ">=v1.2.3", "<=v2"],
    ...[">=1.2.3 <2.0.0-0", ">=1.2.3 <2.0.0", ">1.0.0-alpha <1.0.0-beta.11", ">=0.1.0 <0.2.0 >0.1.2", "<1 >2"],
    ...[">1", ">1.2", "<1", "<1.2", "<=1", "<=1.2", ">=1", ">=1.x", "<1.2.x", ">=1.2.x", "=1.2", "=1.x", ">v1"],
    ...[">*", "<*", ">=*", "<=*", "=*", ">x.x", ">=0.0.0", ">=0.0.0-0", "<0.0.0-0", "<0.0.0", ">==1.2", "<==1.2.3"],
  ],
  caret: [
    ...["^1.2.3", "^1.2.3-rc.1", "^1.2", "^1", "^1.x", "^1.2.x", "^1.x.3", "^1.2.3 <1.9.0", "^v1.2.3", "^=1.2"],
    ...["^0.1.0", "^0.1.5", "^0.1", "^0.x", "^0", "^0.0.x", "^0.0", "^0.0.1", "^0.0.2-rc.1", "^0.0.0", "^0.0.0-0"],
    ...["^*", "^x", "^x.1", "^0.x.1"],
  ],
  tilde: [
    ...["~1", "~1.2", "~1.2.3", "~1.2.3-rc.1", "~1.x", "~1.2.x", "~0", "~0.0", "~0.0.1", "~0.1.5", "~*", "~x.2"],
    ...["~>1", "~>1.2", "~>1.2.3", "~>1.2.3-rc.1", "~>=1.2", "~v1.2"],
  ],
  "x-ranges": [
    ...["*", "", "x", "X", "x.x.x", "*.*", "1.x", "1.X", "1.*", "1.2.*", "1.*.*", "1.x.x", "1.2.x-rc.1", "v1.x"],
    ...["1", "1.2", "0", "0.0", "0.x", "2", "=1", "v1", "vv1.2", "=v1.2", "=1.x.x"],
    ...["1.x.3", "x.1", "x.x.1", "*.1", "1.*.3", "**", "1.x-rc.1", "1.2-rc.1", "1.2.3.x"],
  ],
  hyphen: [
    ...["1.2.3 - 2.3.4", "1.2 - 2.3.4", "1.2.3 - 2.3", "1.2.3 - 2", "1 - 2", "0 - 1", "1.x - 2.x", "* - 2"],
    ...["1.2.3 - *", "x - x", "1.2.3-rc.1 - 2.0.0-rc.1", "1.2.3-rc.1 - 2.0.0", "v1.2.3 - v2.3.4", "=1.2 - =2"],
    ...["1.2.3+b - 2.3.4+c", "1.x.3 - 2.x.4", "1.2.3 - 2.3.4 - 3", ">1.2.3 - 2.3.4", "1.2.3 - <2", "=1.2.3 - 2"],
    ...["1 - =3.2.10", "1 - =3.2", "1 - =3.2.10-rc", "1 - v3.2.10", "v 2 - 3", "1 - v 3", "v 1.2.3 - 3", "= 1 - = 2"],
    ...["1.2.3 -2.3.4", "1.2.3- 2.3.4", "1.2.3-2.3.4", "- 1.2.3", "1.2.3 -", "1.2.3 - 2.3.4 >=2"],
  ],
  or: [
    ...["1.x || >=2.5.0", "1.2.3 || 2.x", "^0.1 || ^1", "<1.0.0 || >=2.0.0", "1.2.3||2.3.4", "1.x ||", "|| 1.x"],
    ...["||", "1.2.3 - 2.0.0 || 3.x", "~1.2.3 || ^2 || 10.x", "<0.0.0-0 || 1.x", "* || 1.2.3", "1 | 2", "1 ||| 2"],
    ...["1.x || latest", "^1.2.3 || >=2.0.0-0 <2.5.0"],
  ],
  whitespace: [
    ...["  >=1.2.3   <2.0.0  ", "\t^1.2.3\n", "> 1.2.3", ">= 1.2.3 < 2", ">=\t1.2.3", "= 1.2.3", "< = 1.2.3"],
    ...["1.2.3  -  2.3.4", "1.x  ||  2.x", "~> 1.2", "~  1.2", "^ 1.2.3", "~ >1.2", "> v1.2.3", "1.2.3 || > 2"],
    ...["1.2.3 ||> 2", "1.2.3 ||= 2", ">= =1.2", "> = 1.2", "v= 1.2", "1.2.3 = 2", "\u00a0^1.2.3\u3000"],
    // Build metadata standing alone leaves its spaces behind, and npm joins operators across them its own way.
    ...["1 +b > 2.2", "x +b = 3", "+b = 1", "v = 3", "^ +b 1.2", "+b 1 - 2", "+b +b 1 - 2", "1.2.3 +b - 2"],
  ],
  invalid: [
    ...["latest", "next", "a.b.c", "1.2.3.4", "01.2.3", "1.02.3", "1.2.3-01", "1.2.3-a..b", ">", "<=", "=", "^", "~"],
    ...[
      "~>",
      ">=1.2.3 <",
      "!1.2.3",
      "!=1.2.3",
      "1.2.3 !",
      "^1.2.3 foo",
      "^ ",
      ">>1",
      "<>1",
      "=>1",
      "=<1",
      "^^1",
      "~~1",
    ],
    ...["^~1", "~^1", ">^1", "^>1", "1.2.3 1.2.3", "1.2.3 ^1", ">=9007199254740992", "^9007199254740991", "1.2.3-"],
    ...["9007199254740991.x", "^9007199254740990.x", ">9007199254740991", "~1.9007199254740991", "1.2.3+a+b"],
    ...[">=9".repeat(2), `>=${"9".repeat(300)}`, `^1.2.3-${"a".repeat(300)}`],
  ],
  "long versions (npm stops at 256 characters)": [
    ...[`1.2.3-${A250}`, `v1.2.3-${A250}`, `1.2.3-${A250}a`, `^1.2.3-${A250}`, `~v1.2.3-${A250}`],
    ...[`1.2.3-${A250} - 2`, `v1.2.3-${A250} - 2`, `1 - 2.0.0-${A250}`, `1 - v2.0.0-${A250}`, `>=1.2.3-${A250}.b`],
  ],
  "not strings": [1, 1.2, null, undefined, {}, ["1.2.3"], true, Symbol("1.2.3"), () => "1.2.3"],
};

const PAIRS = Object.values(RANGES).flat().length * VERSIONS.length;

describe("the kernel's semver, against npm's", () => {
  it(`covers a table of ${PAIRS} (version, range) pairs`, () => {
    expect(PAIRS).toBeGreaterThan(300);
  });

  for (const [construct, ranges] of Object.entries(RANGES)) {
    describe(construct, () => {
      it.each(
        ranges.map((range) => ({ range, title: typeof range === "string" ? JSON.stringify(range) : String(range) })),
      )("$title", ({ range }) => {
        expect(validRange(range)).toBe(reference.validRange(range));
        const ours = VERSIONS.map((version) => [version, satisfies(version, range)]);
        expect(ours).toEqual(VERSIONS.map((version) => [version, reference.satisfies(version, range)]));
      });
    });
  }

  it("reads what plugins write the way npm documents it", () => {
    expect(satisfies("1.3.0-beta", "^1.2.3")).toBe(true);
    expect(satisfies("2.0.0-0", "^1.2.3")).toBe(false);
    expect(satisfies("1.0.0-rc.1", "1.x || >=2.5.0")).toBe(true);
    expect(satisfies("2.4.9", "1.x || >=2.5.0")).toBe(false);
    expect(satisfies("0.1.9", "^0.1")).toBe(true);
    expect(satisfies("0.2.0", "^0.1")).toBe(false);
    expect(satisfies("0.0.2", "^0.0.1")).toBe(false);
    expect(satisfies("1.9.9", "~1")).toBe(true);
    expect(satisfies("2.3.4", "1.2.3 - 2.3.4")).toBe(true);
    expect(satisfies("1.0.0", "1.0.0-rc.1")).toBe(false);
    expect(validRange("")).toBe(true);
    expect(validRange("latest")).toBe(false);
    expect(validRange(1)).toBe(false);
    expect(satisfies(1, "*")).toBe(false);
  });

  it("rejects a star glued to a version, which npm deletes and then reads the rest (a deliberate difference)", () => {
    for (const range of ["*1.2.3", ">*1.2.3", "<*1.2.3-rc.1", "1.2.3*", "1.2*.3", "^1.2.3 >=*1.0.0"]) {
      expect([range, npmValidRange(range) !== null, validRange(range)]).toEqual([range, true, false]);
    }
  });
});
