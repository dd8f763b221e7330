/**
 * The README and docs/ read on any code host: every relative link and `#anchor` resolves to a
 * file and a heading that exist, the README links every guide, and its package map (and the
 * layout page) names every package and example in the repository.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { anchors, docPages, links, read, REPO, slug } from "./support/markdown.ts";

/** Every broken relative link of a page, as `page:line: target (why)`. */
function brokenLinks(page: string, text: string): string[] {
  const broken: string[] = [];
  for (const { target, line } of links(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue;
    const [path = "", anchor] = target.split("#", 2) as [string, string | undefined];
    const at = `${page}:${line}: ${target}`;
    if (path === "") {
      if (!anchors(text).has(decodeURIComponent(anchor!))) broken.push(`${at} (no heading makes #${anchor})`);
      continue;
    }
    const file = normalize(join(REPO, dirname(page), decodeURIComponent(path)));
    if (relative(REPO, file).startsWith("..")) broken.push(`${at} (outside the repository)`);
    else if (!existsSync(file)) broken.push(`${at} (no such file)`);
    else if (anchor !== undefined) {
      if (statSync(file).isDirectory() || !file.endsWith(".md"))
        broken.push(`${at} (an anchor into a file that is not Markdown)`);
      else if (!anchors(read(relative(REPO, file))).has(decodeURIComponent(anchor)))
        broken.push(`${at} (no heading makes #${anchor})`);
    }
  }
  return broken;
}

/** The lines of a page's section under `## heading`, up to the next `## `. */
function section(text: string, heading: string): string {
  return text.split(new RegExp(`^## ${heading}$`, "m"))[1]?.split(/^## /m)[0] ?? "";
}

describe("links in README.md and docs/", () => {
  it("every relative link and #anchor resolves to a file and a heading that exist", () => {
    const pages = docPages();
    expect(pages).toContain("docs/promises.md");
    const all = pages.flatMap((p) => links(read(p)));
    // The checker sees the links: both kinds are there to check.
    expect(all.filter((l) => l.target.includes("#")).length).toBeGreaterThan(0);
    expect(all.length).toBeGreaterThan(50);
    expect(pages.flatMap((p) => brokenLinks(p, read(p)))).toEqual([]);
  });

  it("so do those of the examples' READMEs and the fault suite's, which the guides send readers to", () => {
    const pages = [
      "test/fault/README.md",
      ...readdirSync(join(REPO, "examples"))
        .map((e) => `examples/${e}/README.md`)
        .filter((p) => existsSync(join(REPO, p))),
    ];
    expect(pages.length).toBeGreaterThan(5);
    expect(pages.flatMap((p) => brokenLinks(p, read(p)))).toEqual([]);
  });

  it("a link to a missing file, a missing heading or outside the repository is reported", () => {
    const text = [
      "# A page",
      "## Its `second` heading!",
      "[ok](#its-second-heading) [ok](plugins.md#choosing-a-phase) [ok](../packages/kernel)",
      "[gone](nowhere.md) [no heading](plugins.md#no-such-heading) [out](../../elsewhere.md)",
      "`[not a link](nowhere.md)`",
      "```md",
      "[in a fence](nowhere.md)",
      "```",
      "[self](#a-missing-one)",
    ].join("\n");
    expect(brokenLinks("docs/example.md", text)).toEqual([
      "docs/example.md:4: nowhere.md (no such file)",
      "docs/example.md:4: plugins.md#no-such-heading (no heading makes #no-such-heading)",
      "docs/example.md:4: ../../elsewhere.md (outside the repository)",
      "docs/example.md:9: #a-missing-one (no heading makes #a-missing-one)",
    ]);
  });

  it("heading anchors are made as code hosts make them", () => {
    expect(slug("In an application: streaming, approvals, structured output")).toBe(
      "in-an-application-streaming-approvals-structured-output",
    );
    expect(slug("`keel studio` and the [CLI](x.md)")).toBe("keel-studio-and-the-cli");
    expect([...anchors("## Tools\n## Tools\n```\n## not a heading\n```\n")]).toEqual(["tools", "tools-1"]);
  });
});

describe("the README", () => {
  const readme = read("README.md");

  it("is read in five minutes: at most 250 lines", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
  });

  it("links every guide and reference page in docs/", () => {
    const linked = new Set(links(readme).map((l) => l.target.split("#")[0]));
    const index = new Set(links(read("docs/README.md")).map((l) => `docs/${l.target.split("#")[0]}`));
    for (const page of docPages().filter((p) => p.startsWith("docs/") && p !== "docs/README.md")) {
      expect(linked, `README.md links ${page}`).toContain(page);
      expect(index, `docs/README.md links ${page}`).toContain(page);
    }
  });

  it("its package map, and docs/layout.md, name every package and example", () => {
    const map = section(readme, "Packages");
    const layout = read("docs/layout.md");
    for (const dir of ["packages", "examples"])
      for (const name of readdirSync(join(REPO, dir)).filter((n) => existsSync(join(REPO, dir, n, "package.json")))) {
        expect(map, `README.md's package map links ${dir}/${name}`).toContain(`](${dir}/${name})`);
        expect(layout, `docs/layout.md names ${dir}/${name}`).toContain(`\`${dir}/${name}\``);
      }
  });
});
