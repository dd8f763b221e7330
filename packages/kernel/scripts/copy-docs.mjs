// prepack: the kernel's README links to docs/…; the published package carries copies of the
// repository's docs there (the folder is build output, ignored by git).
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGED_DOCS = ["plugins.md", "contributions.md", "phases.md", "errors.md", "architecture.md"];
const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = process.argv[2] ?? join(pkg, "docs");
mkdirSync(out, { recursive: true });
for (const name of PACKAGED_DOCS) copyFileSync(join(pkg, "..", "..", "docs", name), join(out, name));
