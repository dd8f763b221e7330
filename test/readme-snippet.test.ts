import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { docPages, fences, read, REPO as root, snippetUnder } from "./support/markdown.ts";

describe("README", () => {
  it("the plugin-and-agent snippet runs as written", async () => {
    const snippet = snippetUnder(read("README.md"), "A plugin and an agent");
    expect(snippet).toContain("definePlugin");
    // Inside the example package so that @keel/kernel and zod resolve as they would for a user.
    const file = join(root, "examples/minimal", `.readme-snippet-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-"));
    writeFileSync(file, snippet!);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, KEEL_HOME: home, DEBUG: "" },
      });
      expect(stdout.trim()).toBe("Hello!");
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("docs/applications.md", () => {
  it("streams a turn that pauses for approval, resumes it, and returns typed structured output", async () => {
    const snippet = snippetUnder(
      read("docs/applications.md"),
      "In an application: streaming, approvals, structured output",
    );
    expect(snippet).toContain("pendingApprovals");
    const file = join(root, "examples/minimal", `.readme-app-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-app-"));
    writeFileSync(file, snippet!);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, KEEL_HOME: home },
      });
      expect(stdout).toBe(
        "Deploying. [deploy waits: deploys reach production]\npaused\nv1.4.2 is live.\n[ 'none found' ]\n",
      );
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("docs/config.md", () => {
  it("loads, validates and builds an agent with its four plugins", async () => {
    const snippet = snippetUnder(read("docs/config.md"), "An agent in a config file");
    expect(snippet).toContain("defineConfig");
    const { buildAgent, loadConfig } = await import("@keel/cli");
    const file = join(root, "examples/full-stack", `.readme-config-${process.pid}.ts`);
    const home = mkdtempSync(join(tmpdir(), "keel-readme-config-"));
    writeFileSync(file, snippet!);
    try {
      const built = await buildAgent(await loadConfig({ cwd: root, configPath: file }), { env: {}, home });
      try {
        expect(built.offline).toBe(true);
        expect(built.agent.registry.plugins.map((p) => p.name).sort()).toEqual([
          "@keel/plugin-compaction",
          "@keel/plugin-mcp",
          "@keel/plugin-memory",
          "@keel/plugin-skills",
        ]);
      } finally {
        await built.agent.close();
      }
    } finally {
      rmSync(file, { force: true });
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});

/**
 * The languages whose snippets are checked: the extension each is checked as, and the project
 * whose compiler options apply (`tsx` is a browser page's, as in examples/chat-ui; the rest the
 * repository's, Node's).
 */
const CHECKED: Record<string, { ext: string; project: string }> = {
  ts: { ext: "ts", project: "." },
  tsx: { ext: "tsx", project: "examples/chat-ui" },
  js: { ext: "mjs", project: "." },
  mjs: { ext: "mjs", project: "." },
};

/**
 * What a JavaScript snippet is held to: it declares no types, so only what JavaScript itself
 * gets wrong counts: syntax, a module or an export that does not exist, an undefined name, a
 * property or an option that is not there, a call with the wrong number of arguments. (A
 * TypeScript snippet is held to every diagnostic, under its project's strict options.)
 */
const JS_CODES = new Set([2304, 2305, 2307, 2339, 2353, 2551, 2552, 2554, 2555, 2561, 2614, 2724]);

/** A snippet as a file the compiler reads (never written to disk), and where its code sits in its page. */
interface SnippetFile {
  page: string;
  line: number;
  /** Lines of hidden context before the snippet's own code. */
  offset: number;
  codeLines: number;
  text: string;
  project: string;
}

function snippetFiles(): Map<string, SnippetFile> {
  const files = new Map<string, SnippetFile>();
  for (const page of docPages(true))
    for (const f of fences(read(page))) {
      const checked = CHECKED[f.lang];
      if (!checked) continue;
      const before = f.context?.before ?? "";
      // `export {}`: every snippet is a module of its own (top-level await, no shared globals).
      const text = `${before}${f.code}${f.context?.after ?? ""}\nexport {};\n`;
      const name = join(
        root,
        checked.project,
        ".doc-snippets",
        `${page.replace(/[^\w]/g, "_")}-${f.line}.${checked.ext}`,
      );
      files.set(name, {
        page,
        line: f.line,
        offset: before.split("\n").length - 1,
        codeLines: f.code.split("\n").length - 1,
        text,
        project: checked.project,
      });
    }
  return files;
}

const declarations = new Map<string, ts.SourceFile>();

/** Every problem of every snippet, as `page:line: TScode message`; one program per project. */
function typeCheck(files: Map<string, SnippetFile>): string[] {
  const projects = new Set([...files.values()].map((f) => f.project));
  return [...projects].flatMap((project) =>
    checkProject(project, new Map([...files].filter(([, f]) => f.project === project))),
  );
}

/**
 * One program over a project's snippets, with that project's compiler options. A snippet
 * imports what a user installs: a package resolves from the project, else from the repository
 * root, else from the first workspace package or example that depends on it (so
 * `@keel/plugin-router` and `ai` resolve as they do for a project that installed them).
 */
function checkProject(project: string, files: Map<string, SnippetFile>): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, project, "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      },
    },
  )!;
  const options: ts.CompilerOptions = { ...config.options, noEmit: true, allowJs: true, checkJs: true };
  const host = ts.createCompilerHost(options, true);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  host.readFile = (f) => files.get(f)?.text ?? readFile.call(host, f);
  host.getSourceFile = (f, language, ...rest) => {
    const snippet = files.get(f);
    if (snippet) return ts.createSourceFile(f, snippet.text, language, true);
    // The libraries' and packages' declarations, parsed once for every program of the file.
    const key = `${f}\0${typeof language === "object" ? `${language.languageVersion}:${language.impliedNodeFormat}` : language}`;
    let parsed = declarations.get(key);
    if (!parsed) {
      parsed = getSourceFile.call(host, f, language, ...rest);
      if (parsed) declarations.set(key, parsed);
    }
    return parsed;
  };
  const installs = [
    join(root, project),
    root,
    ...["packages", "examples"].flatMap((d) => readdirSync(join(root, d)).map((p) => join(root, d, p))),
  ].map((dir) => join(dir, "snippet.ts"));
  const cache = ts.createModuleResolutionCache(root, (f) => f, options);
  host.resolveModuleNameLiterals = (literals, containing, redirected, opts, source) =>
    literals.map((literal) => {
      const mode = ts.getModeForUsageLocation(source, literal, opts);
      const from = files.has(containing) && !literal.text.startsWith(".") ? installs : [containing];
      for (const at of from) {
        const r = ts.resolveModuleName(literal.text, at, opts, host, cache, redirected, mode);
        if (r.resolvedModule) return r;
      }
      return ts.resolveModuleName(literal.text, containing, opts, host, cache, redirected, mode);
    });
  const program = ts.createProgram({ rootNames: [...files.keys()], options, host });
  const problems: string[] = [];
  for (const [name, snippet] of files) {
    const source = program.getSourceFile(name)!;
    const semantic = program
      .getSemanticDiagnostics(source)
      .filter((d) => !name.endsWith(".mjs") || JS_CODES.has(d.code));
    for (const d of [...program.getSyntacticDiagnostics(source), ...semantic]) {
      const at = source.getLineAndCharacterOfPosition(d.start ?? 0).line - snippet.offset;
      const where =
        at >= 0 && at < snippet.codeLines
          ? `${snippet.page}:${snippet.line + at}`
          : `${snippet.page}:${snippet.line} (its snippet-context)`;
      problems.push(`${where}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`);
    }
  }
  return problems;
}

describe("every ts and js snippet in README.md and the guides in docs/", () => {
  it("type-checks as written, a fragment in the context its page's hidden <!-- snippet-context --> gives", () => {
    const files = snippetFiles();
    const pages = new Set([...files.values()].map((f) => f.page));
    // The README and the guides with code: a page that lost its snippets (or a parser that finds none) fails here.
    for (const page of ["README.md", "docs/outside.md", "docs/config.md", "docs/applications.md", "docs/evals.md"])
      expect(pages, page).toContain(page);
    expect(new Set([...files.keys()].map((f) => f.slice(f.lastIndexOf(".") + 1)))).toEqual(
      new Set(["ts", "tsx", "mjs"]),
    );
    expect(typeCheck(files)).toEqual([]);
  }, 180_000);

  it("a snippet that does not check is reported at its page and line: any TypeScript error, a JavaScript one's missing names", () => {
    const snippet = (page: string, line: number, text: string, project = "."): SnippetFile => ({
      page,
      line,
      offset: 1,
      codeLines: text.split("\n").length - 3,
      text,
      project,
    });
    const problems = typeCheck(
      new Map([
        [
          join(root, ".doc-snippets", "broken.ts"),
          snippet(
            "docs/broken.md",
            12,
            'import { createAgent } from "@keel/agent";\nconst n: number = "one";\nawait createAgent({ nope: 1 });\nexport {};\n',
          ),
        ],
        [
          join(root, ".doc-snippets", "broken.mjs"),
          snippet(
            "docs/broken.md",
            30,
            'import { buildAgent } from "@keel/cli";\nconst typed = { a: 1 }[String(1)];\nawait buildAgen({});\nexport {};\n',
          ),
        ],
        [
          join(root, "examples/chat-ui", ".doc-snippets", "page.tsx"),
          snippet(
            "docs/page.md",
            5,
            'import { useChat } from "@ai-sdk/react";\nconst { messages } = useChat({ id: 1 });\nexport {};\n',
            "examples/chat-ui",
          ),
        ],
      ]),
    );
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/^docs\/broken\.md:12: TS2322 /);
    expect(problems[1]).toMatch(/^docs\/broken\.md:13: TS\d+ .*nope/);
    // The JavaScript snippet: an untyped index passes, a name that does not exist does not.
    expect(problems[2]).toMatch(/^docs\/broken\.md:31: TS2552 Cannot find name 'buildAgen'/);
    expect(problems[3]).toMatch(/^docs\/page\.md:5: TS2322 /);
  }, 180_000);
});
