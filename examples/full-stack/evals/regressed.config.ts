/**
 * The full-stack agent after a change that broke one answer (its offline script forgets the
 * release day). The example's test runs the eval against it with `--baseline` to show the CI
 * gate catching the regression: `keel eval evals/cases.jsonl --config evals/regressed.config.ts
 * --baseline latest --max-regressions 0` exits 3.
 */
import { defineConfig } from "@keel/agent";
import base from "../agent.config.ts";

export default defineConfig({ ...base, offline: { script: "./regressed-script.json" } });
