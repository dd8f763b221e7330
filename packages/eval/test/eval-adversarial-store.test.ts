/** Adversarial: the plain text columns of the experiment stores (not JSON-encoded) on SQLite and PostgreSQL alike. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { endSharedPools } from "@keel/store-postgres";
import { dropTestSchemas, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import type { ExperimentStore } from "../src/index.ts";
import { postgresExperimentStore, sqliteExperimentStore } from "../src/index.ts";
import { caseResult, experiment } from "./store-fixtures.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-adv-experiments-"));
beforeAll(() => requirePostgres());
afterAll(async () => {
  await dropTestSchemas();
  await endSharedPools();
  rmSync(dir, { recursive: true, force: true });
});

const backends: Array<{ name: string; open: () => ExperimentStore }> = [
  { name: "sqlite", open: () => sqliteExperimentStore({ path: join(dir, "s.sqlite") }) },
  { name: "postgres", open: () => postgresExperimentStore(testTarget()) },
];

const HOSTILE = "nul \u0000 lone \ud800 end \udfff 👩🏽‍💻";
/** What both stores read back: the text as PostgreSQL can hold it. Before, SQLite kept the NUL and PostgreSQL did not. */
const KEPT = "nul \uFFFD lone \uFFFD end \uFFFD 👩🏽‍💻";

describe.each(backends)("experiment text columns: $name", ({ open }) => {
  it("an answer, an error and a name with NUL and lone surrogates read back the same from both stores", async () => {
    const store = open();
    try {
      await store.create(experiment({ name: HOSTILE, dataset: HOSTILE }));
      const c = caseResult({ output: HOSTILE, status: "error", error: HOSTILE });
      await store.putCase(c);
      const [back] = await store.cases("exp-1");
      expect(back).toMatchObject({ output: KEPT, error: KEPT });
      expect(await store.get("exp-1")).toMatchObject({ name: KEPT, dataset: KEPT });
    } finally {
      await store.close();
    }
  });
});
