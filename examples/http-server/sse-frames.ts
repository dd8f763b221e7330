/**
 * Test support: the SSE frames of a turn stream, read over a real socket (rejoin.test.ts,
 * recovery.test.ts).
 */
import { expect } from "vitest";
import type { TurnStreamEvent } from "@keel/stream";

/** One frame: the event, with the `id:` it was sent under. */
export type Frame = TurnStreamEvent & { id: string };

/** The SSE frames of a body (their `id:` checked against the event's), optionally stopping early. */
export async function frames(res: Response, stopAt?: (e: Frame) => boolean): Promise<Frame[]> {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const out: Frame[] = [];
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body!) {
    buf += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const lines = buf.slice(0, cut).split("\n");
      buf = buf.slice(cut + 2);
      const e = JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6)) as Frame;
      expect(lines.find((l) => l.startsWith("id: "))).toBe(`id: ${e.id}`);
      out.push(e);
      if (stopAt?.(e)) return out;
    }
  }
  return out;
}
