import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { classifyTurn, dateWindows, extractDeterministic, queryTerms, recall, SqliteMemoryStore } from "../src/index.ts";
import { cleanup, tempDir } from "./support/helpers.ts";

afterEach(cleanup);

const open = () => new SqliteMemoryStore({ path: join(tempDir(), "m.sqlite") });

describe("ranked recall", () => {
  it("keeps within the caps: top 8, 4,000 characters, 500 per item", async () => {
    const s = open();
    for (let i = 0; i < 30; i++) s.write({ namespace: "n", content: `Kubernetes cluster note ${i}: ${"details ".repeat(90)}` });
    const got = await recall(s, { namespace: "n", query: "kubernetes cluster" });
    expect(got.length).toBeLessThanOrEqual(8);
    expect(got.length).toBeGreaterThan(3);
    expect(got.every((r) => r.text.length <= 500)).toBe(true);
    expect(got.every((r) => r.memory.content.length > 500 && r.text.endsWith("…"))).toBe(true);
    expect(got.reduce((n, r) => n + r.text.length, 0)).toBeLessThanOrEqual(4000);
    const small = await recall(s, { namespace: "n", query: "kubernetes cluster", limit: 3, maxChars: 120, itemChars: 60 });
    expect(small.length).toBeLessThanOrEqual(3);
    expect(small.reduce((n, r) => n + r.text.length, 0)).toBeLessThanOrEqual(120);
    s.close();
  });

  it("applies the MECHANICS prior: exact key, primary scope, importance", async () => {
    const s = open();
    const plain = s.write({ namespace: "n", content: "Coffee order: flat white" }).memory;
    const keyed = s.write({ namespace: "n", content: "Coffee order: flat white", key: "coffee.order", scope: "global" }).memory;
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
    expect((await recall(s, { namespace: "n", query: "offsite city", mode: "bm25" })).map((r) => r.memory.id)).not.toContain(answer.id);
    s.close();
  });

  it("boosts memories dated inside a window the query names", async () => {
    const s = open();
    const may = s.write({ namespace: "n", content: "Went to the climbing gym", occurredAt: Date.UTC(2023, 4, 8) }).memory;
    const june = s.write({ namespace: "n", content: "Went to the climbing gym", scope: "project", occurredAt: Date.UTC(2023, 5, 20) }).memory;
    const got = await recall(s, { namespace: "n", query: "climbing gym in May 2023", now: Date.UTC(2023, 6, 1) });
    expect(got[0]!.memory.id).toBe(may.id);
    expect(got.map((r) => r.memory.id)).toContain(june.id);
    expect(dateWindows("on 7 May, 2023")).toEqual([{ start: Date.UTC(2023, 4, 7), end: Date.UTC(2023, 4, 8) }]);
    s.close();
  });
});

describe("query terms, classifier and extractor", () => {
  it("drops stopwords and possessives", () => {
    expect(queryTerms("What is Caroline's favourite book, and when did she read it?")).toEqual(["caroline", "favourite", "book", "read"]);
  });

  it("classifies recall need, write permission and forget requests", () => {
    expect(classifyTurn("thanks!")).toMatchObject({ recall: false, write: true });
    expect(classifyTurn("What did we decide about caching?")).toMatchObject({ recall: true, write: true });
    expect(classifyTurn("Don't remember this, but I'm job hunting.")).toMatchObject({ write: false });
    expect(classifyTurn("This is off the record: I dislike the new logo.")).toMatchObject({ write: false });
    expect(classifyTurn("Please forget that I live in Lisbon.")).toMatchObject({ write: false, forget: "I live in Lisbon" });
  });

  it("extracts profile facts with keys, preferences, notes and decisions; skips questions and secrets", () => {
    const facts = extractDeterministic("Hi! My name is Ada. I prefer dark mode. Remember that the demo is on Friday. We decided to use SQLite for storage. What is my password? My password is hunter2!");
    expect(facts.map((f) => [f.content, f.key ?? null, f.category])).toEqual([
      ["The user's name is Ada", "user.name", "profile"],
      ["The user prefers dark mode", null, "preference"],
      ["the demo is on Friday", null, "note"],
      ["Decision: use SQLite for storage", null, "decision"],
    ]);
    expect(extractDeterministic("My favorite color is blue. ".repeat(3) + Array.from({ length: 20 }, (_, i) => `My pet ${i} is a cat.`).join(" "), 8)).toHaveLength(8);
  });
});
