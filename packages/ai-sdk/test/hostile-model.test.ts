/**
 * aiSdkModel() reads a third-party object and user options: a model whose getters throw (or a
 * Proxy that does) and a malformed contextWindow / maxTokens get a located KeelError at config
 * load, never the raw exception or a value that silently breaks context and budget math later.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { isKeelError } from "@keel/kernel";
import { describe, expect, it } from "vitest";
import { aiSdkModel } from "../src/index.ts";

const failure = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return isKeelError(err) ? { code: err.code, path: err.location.path, message: err.message } : { raw: err };
  }
  return { none: true };
};

const base = {
  specificationVersion: "v3",
  provider: "hand.chat",
  modelId: "m",
  supportedUrls: {},
  doGenerate: async () => ({}),
  doStream: async () => ({}),
};

describe("a model whose properties throw", () => {
  it("a throwing getter gives KEEL_PROVIDER_MODEL_UNSUPPORTED naming what it threw", () => {
    const model = Object.defineProperty({ ...base }, "provider", {
      get() {
        throw new Error("provider getter exploded");
      },
    });
    const f = failure(() => aiSdkModel(model as never));
    expect(f).toMatchObject({ code: "KEEL_PROVIDER_MODEL_UNSUPPORTED", path: "model" });
    expect((f as { message: string }).message).toContain("provider getter exploded");
  });

  it("a Proxy that throws on every read, with a non-Error value, gives the same", () => {
    const model = new Proxy(
      {},
      {
        get() {
          throw 42;
        },
      },
    );
    expect(failure(() => aiSdkModel(model as never))).toMatchObject({
      code: "KEEL_PROVIDER_MODEL_UNSUPPORTED",
      path: "model",
    });
  });
});

describe("options read as numbers", () => {
  const model = () => createOpenAI({ apiKey: "k" }).chat("gpt-4o");
  for (const [key, value] of [
    ["contextWindow", "128k"],
    ["contextWindow", -1],
    ["contextWindow", Number.NaN],
    ["maxTokens", 0],
    ["maxTokens", 1.5],
    ["maxTokens", "4096"],
  ] as const) {
    it(`${key}: ${String(value)} is refused naming the option`, () => {
      const f = failure(() => aiSdkModel(model(), { [key]: value } as never));
      expect(f).toMatchObject({ code: "KEEL_PROVIDER_OPTIONS_INVALID", path: key });
      expect((f as { message: string }).message).toContain(key);
    });
  }

  it("options that are not an object are refused, not a TypeError", () => {
    expect(failure(() => aiSdkModel(model(), null as never))).toMatchObject({ code: "KEEL_PROVIDER_OPTIONS_INVALID" });
  });

  it("valid numbers pass", () => {
    expect(aiSdkModel(model(), { contextWindow: 32_000, maxTokens: 1_000 })).toMatchObject({
      contextWindow: 32_000,
      maxOutputTokens: 1_000,
    });
  });
});
