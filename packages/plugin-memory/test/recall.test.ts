import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  classifyTurn,
  dateWindows,
  eventSpan,
  extractDeterministic,
  hasTimeExpression,
  isFrameWord,
  isWhenQuestion,
  queryTerms,
  recall,
  SqliteMemoryStore,
} from "../src/index.ts";
import { cleanup, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

const open = () => new SqliteMemoryStore({ path: join(tempDir(), "m.sqlite") });

describe("ranked recall", () => {
  it("keeps within the caps: top 8, 4,000 characters, 500 per item", async () => {
    const s = open();
    for (let i = 0; i < 30; i++)
      s.write({ namespace: "n", content: `Kubernetes cluster note ${i}: ${"details ".repeat(90)}` });
    const got = await recall(s, { namespace: "n", query: "kubernetes cluster" });
    expect(got.length).toBeLessThanOrEqual(8);
    expect(got.length).toBeGreaterThan(3);
    expect(got.every((r) => r.text.length <= 500)).toBe(true);
    expect(got.every((r) => r.memory.content.length > 500 && r.text.endsWith("…"))).toBe(true);
    expect(got.reduce((n, r) => n + r.text.length, 0)).toBeLessThanOrEqual(4000);
    const small = await recall(s, {
      namespace: "n",
      query: "kubernetes cluster",
      limit: 3,
      maxChars: 120,
      itemChars: 60,
    });
    expect(small.length).toBeLessThanOrEqual(3);
    expect(small.reduce((n, r) => n + r.text.length, 0)).toBeLessThanOrEqual(120);
    s.close();
  });

  it("applies the MECHANICS prior: exact key, primary scope, importance", async () => {
    const s = open();
    const plain = s.write({ namespace: "n", content: "Coffee order: flat white" }).memory;
    const keyed = s.write({
      namespace: "n",
      content: "Coffee order: flat white",
      key: "coffee.order",
      scope: "global",
    }).memory;
    const global = s.write({ namespace: "n", content: "Tea order: green tea", scope: "global" }).memory;
    const user = s.write({ namespace: "n", content: "Tea order: green tea", scope: "user" }).memory;
    const low = s.write({ namespace: "n", content: "Lunch order: salad", importance: 0 }).memory;
    const high = s.write({ namespace: "n", content: "Lunch order: salad bowl", importance: 1 }).memory;
    const ids = async (q: string) => (await recall(s, { namespace: "n", query: q })).map((r) => r.memory.id);
    expect((await ids("coffee order"))[0]).toBe(keyed.id);
    expect(await ids("coffee order")).toContain(plain.id);
    const tea = await ids("tea");
    expect(tea.indexOf(user.id)).toBeLessThan(tea.indexOf(global.id));
    const lunch = await ids("lunch salad");
    expect(lunch.indexOf(high.id)).toBeLessThan(lunch.indexOf(low.id));
    s.close();
  });

  it("lifts the answer that follows a matching question in the same session", async () => {
    const s = open();
    const src = { sessionId: "chat-1" };
    s.write({ namespace: "n", content: "Mia: Which city did you pick for the offsite?", source: src });
    const answer = s.write({ namespace: "n", content: "Leo: We went with Porto in the end.", source: src }).memory;
    s.write({ namespace: "n", content: "Unrelated: the printer is jammed again", source: { sessionId: "chat-2" } });
    const got = await recall(s, { namespace: "n", query: "offsite city" });
    expect(got.map((r) => r.memory.id)).toContain(answer.id);
    expect(
      (await recall(s, { namespace: "n", query: "offsite city", mode: "bm25" })).map((r) => r.memory.id),
    ).not.toContain(answer.id);
    s.close();
  });

  it("boosts memories dated inside a window the query names", async () => {
    const s = open();
    const may = s.write({
      namespace: "n",
      content: "Went to the climbing gym",
      occurredAt: Date.UTC(2023, 4, 8),
    }).memory;
    const june = s.write({
      namespace: "n",
      content: "Went to the climbing gym",
      scope: "project",
      occurredAt: Date.UTC(2023, 5, 20),
    }).memory;
    const got = await recall(s, { namespace: "n", query: "climbing gym in May 2023", now: Date.UTC(2023, 6, 1) });
    expect(got[0]!.memory.id).toBe(may.id);
    expect(got.map((r) => r.memory.id)).toContain(june.id);
    expect(dateWindows("on 7 May, 2023")).toEqual([{ start: Date.UTC(2023, 4, 7), end: Date.UTC(2023, 4, 8) }]);
    s.close();
  });
});

describe("temporal and speaker-aware ranking", () => {
  it("prefers, for a when-question, the turn carrying a time expression and the named speaker's turn", async () => {
    const s = open();
    for (let i = 0; i < 20; i++)
      s.write({ namespace: "filler", content: `Filler note ${i} about gardening and weather` });
    const src = { sessionId: "s1" };
    const undated = s.write({
      namespace: "n",
      content: "Ana: Signing up for pottery? Pottery is great fun, I sign up again and again!",
      source: src,
    }).memory;
    const dated = s.write({
      namespace: "n",
      content: "Ana: I signed up for the pottery course last Friday.",
      source: { sessionId: "s2" },
    }).memory;
    const when = await recall(s, { namespace: "n", query: "When did Ana sign up for pottery?" });
    expect(when[0]!.memory.id).toBe(dated.id);
    const off = await recall(s, {
      namespace: "n",
      query: "When did Ana sign up for pottery?",
      tuning: { timeBoost: 0 },
    });
    expect(off[0]!.memory.id).toBe(undated.id);
    const other = s.write({ namespace: "n", content: "Ben: pottery with Ana", source: { sessionId: "s3" } }).memory;
    const ana = await recall(s, { namespace: "n", query: "What does Ana think of pottery?" });
    expect(ana[0]!.memory.content.startsWith("Ana:")).toBe(true);
    const noBoost = await recall(s, {
      namespace: "n",
      query: "What does Ana think of pottery?",
      tuning: { speakerBoost: 0 },
    });
    expect(noBoost[0]!.memory.id).toBe(other.id);
    s.close();
  });

  it("matches a date window against the span a memory's own words point to", async () => {
    const s = open();
    const may8 = Date.UTC(2023, 4, 8);
    const hike = s.write({
      namespace: "n",
      content: "Kim: we hiked the ridge last week",
      occurredAt: may8,
      at: may8,
    }).memory;
    const plain = s.write({
      namespace: "n",
      content: "Kim: we hiked the ridge again",
      occurredAt: may8,
      at: may8,
    }).memory;
    const now = Date.UTC(2023, 5, 1);
    const got = await recall(s, { namespace: "n", query: "Where did Kim hike in April 2023?", now });
    expect(got[0]!.memory.id).toBe(hike.id);
    const off = await recall(s, {
      namespace: "n",
      query: "Where did Kim hike in April 2023?",
      now,
      tuning: { eventDates: false },
    });
    expect(off.find((r) => r.memory.id === hike.id)!.relevance).toBeCloseTo(
      off.find((r) => r.memory.id === plain.id)!.relevance,
      0,
    );
    s.close();
  });

  it("reads time expressions, when-questions, event spans and month names without a year", () => {
    expect(isWhenQuestion("When did Jon open his studio?")).toBe(true);
    expect(isWhenQuestion("What year did they move?")).toBe(true);
    expect(isWhenQuestion("What did Jon open?")).toBe(false);
    expect(hasTimeExpression("I went there last Saturday")).toBe(true);
    expect(hasTimeExpression("We moved in 2019")).toBe(true);
    expect(hasTimeExpression("I may like it")).toBe(false);
    expect(eventSpan("I won two weeks ago and we meet next month")).toEqual({ back: 17, fwd: 45 });
    expect(eventSpan("nothing relative here")).toEqual({ back: 0, fwd: 0 });
    const now = Date.UTC(2023, 9, 1);
    expect(dateWindows("Which park did she visit in May?", now)).toEqual(
      [2021, 2022, 2023].map((y) => ({ start: Date.UTC(y, 4, 1), end: Date.UTC(y, 5, 1) })),
    );
    expect(dateWindows("May I ask what you did?", now)).toEqual([]);
  });
});

describe("vocabulary and date handling", () => {
  it('finds a memory through a word form the stemmer keeps apart ("tourney" for "tournament")', async () => {
    const s = open();
    const src = { sessionId: "s1" };
    for (let i = 0; i < 12; i++)
      s.write({
        namespace: "n",
        content: `Nate: I win at chess against my cousin, round ${i}`,
        source: { sessionId: `c${i}` },
      });
    const won = s.write({
      namespace: "n",
      content: "Nate: I just won another regional video game tournament last week!",
      source: src,
    }).memory;
    const q = "Which tourney did Nate win in his third year?";
    const ids = async (tuning = {}) =>
      (await recall(s, { namespace: "n", query: q, tuning })).slice(0, 3).map((r) => r.memory.id);
    expect(await ids()).toContain(won.id);
    expect(await ids({ variants: 0 })).not.toContain(won.id);
    s.close();
  });

  it("brings in memories from inside the dates a question names, even when the words match better elsewhere", async () => {
    const s = open();
    const day = 86_400_000;
    for (let i = 0; i < 200; i++) s.write({ namespace: "n", content: `Ben: cooking note y${i}` });
    for (let i = 0; i < 70; i++)
      s.write({
        namespace: "n",
        content: `Tim: notes x${i} on the August 2023 reading list`,
        occurredAt: Date.UTC(2022, 0, 1) + i * day,
        at: Date.UTC(2022, 0, 1) + i * day,
      });
    const aug14 = Date.UTC(2023, 7, 14);
    const trip = s.write({
      namespace: "n",
      content: "Tim: Took a trip to a new place, love the energy there.",
      occurredAt: aug14,
      at: aug14,
    }).memory;
    const q = {
      namespace: "n",
      query: "Where was Tim between August 11 and August 15 2023?",
      now: Date.UTC(2023, 11, 1),
    };
    expect((await recall(s, q))[0]!.memory.id).toBe(trip.id);
    // Without the window's own candidates it is not even among the 60 best word matches.
    expect((await recall(s, { ...q, limit: 60, tuning: { dateCandidates: 0 } })).map((r) => r.memory.id)).not.toContain(
      trip.id,
    );
    // Candidates alone are not enough: the window's share (×3) puts it first.
    expect((await recall(s, { ...q, tuning: { dateBoost: 0 } }))[0]!.memory.id).not.toBe(trip.id);
    s.close();
  });

  it('reads day ranges, days without a year and "the week before"', () => {
    const d = (y: number, m: number, day: number) => Date.UTC(y, m - 1, day);
    const now = d(2023, 12, 1);
    expect(dateWindows("between August 11 and August 15 2023", now)).toContainEqual({
      start: d(2023, 8, 11),
      end: d(2023, 8, 16),
    });
    expect(dateWindows("in the week before 16 November 2023", now)).toEqual([
      { start: d(2023, 11, 9), end: d(2023, 11, 17) },
    ]);
    expect(dateWindows("the day after May 3, 2022", now)).toEqual([{ start: d(2022, 5, 3), end: d(2022, 5, 5) }]);
    expect(dateWindows("what happened on the 15th of August?", now)).toEqual(
      [2023, 2022, 2021].map((y) => ({ start: d(y, 8, 15), end: d(y, 8, 16) })),
    );
    expect(dateWindows("on August 3?", now)).toEqual(
      [2023, 2022, 2021].map((y) => ({ start: d(y, 8, 3), end: d(y, 8, 4) })),
    );
    expect(dateWindows("May 40 is no day", now)).toEqual([]);
  });

  it('reads no month out of the modal "may", the verb "march" or an abbreviation without a month\'s company', () => {
    const d = (y: number, m: number, day: number) => Date.UTC(y, m - 1, day);
    const now = d(2023, 12, 1);
    for (const q of [
      "What may Anna do in may be?",
      "Since may I ask, what did she do?",
      "May 5 people come?",
      "you may 2 times ask",
      "you may 2000 times ask",
      "Is it May 2048-token?",
      "they march 5 miles",
      "We march 12 blocks",
      "sept 3 years ago",
    ]) {
      expect(dateWindows(q, now), q).toEqual([]);
    }
    const mayIn = (y: number) => ({ start: d(y, 5, 1), end: d(y, 6, 1) });
    // A capital mid-sentence, a day or year beside it, or "in" with the clause ending after it: a month.
    for (const q of ["What did she do in May?", "early May", "what did she do in may?", "Since May, has she run?"])
      expect(dateWindows(q, now), q).toEqual([2021, 2022, 2023].map(mayIn));
    expect(dateWindows("since March", now)).toEqual(
      [2021, 2022, 2023].map((y) => ({ start: d(y, 3, 1), end: d(y, 4, 1) })),
    );
    expect(dateWindows("May 7, 2023", now)).toEqual([{ start: d(2023, 5, 7), end: d(2023, 5, 8) }]);
    expect(dateWindows("7 May 2023", now)).toEqual([{ start: d(2023, 5, 7), end: d(2023, 5, 8) }]);
    expect(dateWindows("May 5?", now)).toEqual([2023, 2022, 2021].map((y) => ({ start: d(y, 5, 5), end: d(y, 5, 6) })));
    expect(dateWindows("what happened may 2022", now)).toEqual([mayIn(2022)]);
  });

  it("reads no year out of a count, price, port or token that only looks like one", () => {
    const d = (y: number, m: number, day: number) => Date.UTC(y, m - 1, day);
    const now = d(2023, 12, 1);
    for (const q of [
      "Did she run 2000 meters?",
      "Which model has a 2048-token context?",
      "What listens on port 2020?",
      "Was it $1999?",
      "Are there 2021 items left?",
      "Is it ISO 2022-style?",
      "Did 2020 people come?",
      "Is it 2020x faster?",
    ]) {
      expect(dateWindows(q, now), q).toEqual([]);
    }
    // Nor does such a number name the year of a day without one.
    expect(dateWindows("Did she run 2000 meters on August 3?", now)).toEqual(
      [2023, 2022, 2021].map((y) => ({ start: d(y, 8, 3), end: d(y, 8, 4) })),
    );
    const year = (y: number) => [{ start: d(y, 1, 1), end: d(y + 1, 1, 1) }];
    expect(dateWindows("What happened in 2022?", now)).toEqual(year(2022));
    expect(dateWindows("Has she lived there since 2019?", now)).toEqual(year(2019));
    expect(dateWindows("What did she do in the summer of 2021", now)).toEqual(year(2021));
    expect(dateWindows("Which year was it, 2020?", now)).toEqual(year(2020));
    expect(dateWindows("Did she go to the 2022 Olympics?", now)).toEqual(year(2022));
    expect(dateWindows("In 2020 people stayed home; why?", now)).toEqual(year(2020));
  });

  it("drops the words that frame a question about a person", async () => {
    expect(isFrameWord("considered")).toBe(true);
    expect(isFrameWord("degree")).toBe(false);
    const s = open();
    const degree = s.write({ namespace: "n", content: "Ana: I finished my degree in economics" }).memory;
    s.write({ namespace: "n", content: "Ben: hard to describe the rain, it was considered a record" });
    const q = { namespace: "n", query: "How is Ana's degree described, and what is it considered?" };
    expect((await recall(s, q)).map((r) => r.memory.id)).toEqual([degree.id]);
    expect((await recall(s, { ...q, tuning: { frameWords: false } })).length).toBe(2);
    s.close();
  });
});

describe("query terms, classifier and extractor", () => {
  it("drops stopwords and possessives", () => {
    expect(queryTerms("What is Caroline's favourite book, and when did she read it?")).toEqual([
      "caroline",
      "favourite",
      "book",
      "read",
    ]);
  });

  it("classifies recall need, write permission and forget requests", () => {
    expect(classifyTurn("thanks!")).toMatchObject({ recall: false, write: true });
    expect(classifyTurn("What did we decide about caching?")).toMatchObject({ recall: true, write: true });
    expect(classifyTurn("Don't remember this, but I'm job hunting.")).toMatchObject({ write: false });
    expect(classifyTurn("This is off the record: I dislike the new logo.")).toMatchObject({ write: false });
    expect(classifyTurn("Please forget that I live in Lisbon.")).toMatchObject({
      write: false,
      forget: "I live in Lisbon",
    });
  });

  it("extracts profile facts with keys, preferences, notes and decisions; skips questions and secrets", () => {
    const facts = extractDeterministic(
      "Hi! My name is Ada. I prefer dark mode. Remember that the demo is on Friday. We decided to use SQLite for storage. What is my password? My password is hunter2!",
    );
    expect(facts.map((f) => [f.content, f.key ?? null, f.category])).toEqual([
      ["The user's name is Ada", "user.name", "profile"],
      ["The user prefers dark mode", null, "preference"],
      ["the demo is on Friday", null, "note"],
      ["Decision: use SQLite for storage", null, "decision"],
    ]);
    expect(
      extractDeterministic(
        "My favorite color is blue. ".repeat(3) +
          Array.from({ length: 20 }, (_, i) => `My pet ${i} is a cat.`).join(" "),
        8,
      ),
    ).toHaveLength(8);
  });
});
