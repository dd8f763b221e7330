import { describe, expect, it } from "vitest";
import {
  ContextualRouter,
  createRng,
  MemoryPosteriorStore,
  sampleBeta,
  sampleGamma,
  ThompsonSampler,
} from "../src/index.ts";

describe("seeded randomness", () => {
  it("is deterministic per seed and differs across seeds", () => {
    const a = createRng(7),
      b = createRng(7),
      c = createRng(8);
    const xs = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it("Gamma and Beta draws have the right means (Marsaglia–Tsang, shapes above and below 1)", () => {
    const rng = createRng("moments");
    const mean = (f: () => number, n = 20_000) => Array.from({ length: n }, f).reduce((s, x) => s + x, 0) / n;
    expect(mean(() => sampleGamma(rng, 3.5))).toBeCloseTo(3.5, 1);
    expect(mean(() => sampleGamma(rng, 0.4))).toBeCloseTo(0.4, 1);
    expect(mean(() => sampleBeta(rng, 2, 6))).toBeCloseTo(0.25, 2);
    expect(mean(() => sampleBeta(rng, 0.5, 0.5))).toBeCloseTo(0.5, 1);
    expect(() => sampleGamma(rng, 0)).toThrow(RangeError);
  });
});

describe("reference behaviours of the Beta(successes+1, failures+1) sampler", () => {
  it("a 50:1 arm beats a 1:50 arm in at least 950 of 1,000 seeded draws", () => {
    const ts = new ThompsonSampler({ seed: 1 });
    ts.set("good", { successes: 50, failures: 1 });
    ts.set("bad", { successes: 1, failures: 50 });
    let wins = 0;
    for (let i = 0; i < 1000; i++) if (ts.pick() === "good") wins++;
    expect(wins).toBeGreaterThanOrEqual(950);
  });

  it("from a cold start, 80% vs 20% arms: the 80% arm gets more than 400 of 500 picks", () => {
    const ts = new ThompsonSampler({ seed: 2, arms: ["p80", "p20"] });
    const env = createRng("env");
    let good = 0;
    for (let i = 0; i < 500; i++) {
      const arm = ts.pick()!;
      if (arm === "p80") good++;
      ts.update(arm, env.next() < (arm === "p80" ? 0.8 : 0.2) ? 1 : 0);
    }
    expect(good).toBeGreaterThan(400);
  });
});

const SKILLS = [
  { name: "ledger", description: "Works with documents and records." },
  { name: "verse", description: "Works with documents and records." },
  { name: "travel", description: "Plans trips, flights and hotel bookings." },
];

describe("contextual router", () => {
  it("learns which skill serves which kind of request, where relevance alone cannot tell", () => {
    const router = new ContextualRouter({ seed: 3, skills: SKILLS });
    const env = createRng("requests");
    const kinds = [
      { words: ["invoice", "tax", "receipt", "balance", "payment"], skill: "ledger" },
      { words: ["poem", "rhyme", "sonnet", "stanza", "lyric"], skill: "verse" },
    ];
    const ask = () => {
      const kind = kinds[Math.floor(env.next() * 2)]!;
      const w = () => kind.words[Math.floor(env.next() * kind.words.length)]!;
      return { text: `please help with this document: ${w()} ${w()} records`, skill: kind.skill };
    };
    let right = 0;
    for (let i = 0; i < 300; i++) {
      const q = ask();
      const pick = router.pick(q.text)!;
      const ok = pick.skill === q.skill;
      if (i >= 200 && ok) right++;
      router.update(pick, ok ? 1 : 0);
    }
    expect(right).toBeGreaterThanOrEqual(95);
    const blind = new ThompsonSampler({ seed: 3, arms: SKILLS.map((s) => s.name) });
    let blindRight = 0;
    for (let i = 0; i < 300; i++) {
      const q = ask();
      const arm = blind.pick()!;
      if (i >= 200 && arm === q.skill) blindRight++;
      blind.update(arm, arm === q.skill ? 1 : 0);
    }
    expect(blindRight).toBeLessThan(70);
    expect(router.rank("tax receipt for the records")[0]!.skill).toBe("ledger");
    expect(router.rank("a sonnet with rhyme")[0]!.skill).toBe("verse");
  });

  it("starts from relevance (BM25 over name and description) and is deterministic for a seed", () => {
    const picks = (seed: number) => {
      const r = new ContextualRouter({ seed, skills: SKILLS });
      return Array.from(
        { length: 20 },
        (_, i) => r.pick(i % 2 ? "book a flight and a hotel" : "records of documents")!.skill,
      );
    };
    expect(picks(5)).toEqual(picks(5));
    expect(
      picks(5)
        .filter((_, i) => i % 2)
        .every((s) => s === "travel"),
    ).toBe(true);
  });

  it("a forced pick names the skill whatever the posterior says; an unknown forced name is ignored", () => {
    const router = new ContextualRouter({ seed: 4, skills: SKILLS });
    const forced = router.pick("book a flight", { force: "verse" })!;
    expect(forced).toMatchObject({ skill: "verse", forced: true, candidates: [] });
    expect(router.pick("book a flight", { force: "nope" })!).toMatchObject({ skill: "travel", forced: false });
    expect(new ContextualRouter({ seed: 4 }).pick("anything")).toBeUndefined();
  });

  it("a discount lets old evidence fade", () => {
    const learn = (discount: number) => {
      const store = new MemoryPosteriorStore();
      const router = new ContextualRouter({ seed: 6, skills: SKILLS, store, tuning: { discount } });
      for (let i = 0; i < 30; i++) router.update({ skill: "verse", terms: ["invoice"], candidates: [] }, 1);
      const after = router.rank("invoice").find((r) => r.skill === "verse")!.probability;
      for (let i = 0; i < 200; i++) router.update({ skill: "travel", terms: ["flight"], candidates: [] }, 1);
      return { after, later: router.rank("invoice").find((r) => r.skill === "verse")!.probability };
    };
    const kept = learn(1);
    const faded = learn(0.98);
    expect(kept.later).toBeGreaterThanOrEqual(kept.after - 0.01);
    expect(faded.later).toBeLessThan(faded.after - 0.2);
  });

  it("rewardNoise discounts a reward that contradicts a confident posterior (robust likelihood)", () => {
    const dropAfterFailure = (rewardNoise: number) => {
      const store = new MemoryPosteriorStore();
      const trainer = new ContextualRouter({ seed: 8, skills: SKILLS, store });
      for (let i = 0; i < 60; i++) trainer.update({ skill: "verse", terms: ["sonnet"], candidates: [] }, 1);
      const before = trainer.rank("sonnet").find((r) => r.skill === "verse")!.probability;
      new ContextualRouter({ seed: 8, skills: SKILLS, store, tuning: { rewardNoise } }).update(
        { skill: "verse", terms: ["sonnet"], candidates: [] },
        0,
      );
      return { before, drop: before - trainer.rank("sonnet").find((r) => r.skill === "verse")!.probability };
    };
    const plain = dropAfterFailure(0);
    const robust = dropAfterFailure(0.1);
    expect(robust.before).toBeCloseTo(plain.before, 12);
    expect(plain.before).toBeGreaterThan(0.9);
    expect(plain.drop).toBeGreaterThan(0);
    expect(robust.drop).toBeGreaterThan(0);
    expect(robust.drop).toBeLessThan(plain.drop / 2);
  });
});
