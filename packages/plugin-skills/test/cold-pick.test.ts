import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Bm25 } from "@keel/text/retrieval";
import { ContextualRouter, createRng, SkillsStore, terms, tokenize } from "../src/index.ts";

const temps: string[] = [];
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

const VOCAB =
  "invoice receipt flight hotel poem verse chart graph email calendar meeting summary translate spanish recipe cook budget tax report code review bug test deploy server photo resize".split(
    " ",
  );

/** A seeded catalog of near-duplicate skills (shared words make BM25 near-ties) and a query. */
function world(seed: number) {
  const rng = createRng(`world:${seed}`);
  const word = () => VOCAB[Math.floor(rng.next() * VOCAB.length)]!;
  const n = 4 + Math.floor(rng.next() * 30);
  const skills = Array.from({ length: n }, (_, i) => ({
    name: `skill-${i}`,
    description: Array.from({ length: 3 + Math.floor(rng.next() * 6) }, word).join(" "),
  }));
  const query = Array.from({ length: 2 + Math.floor(rng.next() * 4) }, word).join(" ");
  return { skills, query };
}

describe("cold start: the first pick is the prior's own top pick", () => {
  it("over 300 seeded catalogs and queries, a fresh router never picks a skill the BM25 prior ranks below another", () => {
    let nearTies = 0;
    for (let seed = 0; seed < 300; seed++) {
      const { skills, query } = world(seed);
      const prior = new Bm25(skills.map((s) => tokenize(`${s.name} ${s.description}`))).score(terms(query));
      const best = Math.max(...prior);
      const router = new ContextualRouter({ seed, skills });
      const pick = router.pick(query)!;
      const score = prior[skills.findIndex((s) => s.name === pick.skill)]!;
      expect(score, `seed ${seed}: picked ${pick.skill} for "${query}"`).toBe(best);
      const sorted = [...prior].sort((a, b) => b - a);
      if (sorted[0]! > 0 && sorted[0]! - sorted[1]! < 0.05 * sorted[0]!) nearTies++;
    }
    // The property is only worth something if the catalogs hold near-ties a draw could flip.
    expect(nearTies).toBeGreaterThan(20);
  });

  it("with a real SQLite store, exploration starts once the context has evidence: a failed pick hands the turn to the runner-up", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-skills-cold-"));
    temps.push(dir);
    const store = new SkillsStore(join(dir, "skills.sqlite"));
    try {
      const skills = [
        { name: "trip-planner", description: "plan trips flights hotels" },
        { name: "trip-booker", description: "plan trips flights hotels bookings" },
        { name: "poems", description: "write poems" },
      ];
      const router = new ContextualRouter({ seed: 3, skills, store });
      const first = router.pick("plan trips with flights and hotels")!;
      expect(first.skill).toBe("trip-planner");
      router.update(first, 0);
      router.update(first, 0);
      expect(router.pick("plan trips with flights and hotels")!.skill).toBe("trip-booker");
    } finally {
      store.close();
    }
  });
});
