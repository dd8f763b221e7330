/** A chain of providers: a rate-limited or overloaded one is frozen with growing backoff and the next serves. */
import { KeelError, ProviderError, type ModelEvent, type ModelProvider, type ModelRequest } from "@keel/kernel";

/** Options of fallback(). */
export interface FallbackOptions {
  /** First freeze, ms; doubles with each further strike. Default 30,000. */
  baseFreezeMs?: number;
  /** Longest freeze, ms. Default 600,000. */
  maxFreezeMs?: number;
  /** Clock (tests). Default Date.now. */
  now?: () => number;
}

/** The freeze state of one provider of a chain. */
export interface FreezeState {
  id: string;
  /** Epoch ms until which it is frozen (0: not frozen). */
  frozenUntil: number;
  /** Consecutive rate-limit/overload failures. */
  strikes: number;
}

/** A provider chain; `states()` shows who is frozen. */
export interface FallbackProvider extends ModelProvider {
  states(): FreezeState[];
}

/**
 * Serve each request from the first provider that is not frozen.
 * Contract: a provider failing with `rate_limited`, `overloaded` or `timeout` before it streamed any delta
 * (a stall, `timeout`, even after deltas, which the notice then voids) is frozen for
 * min(max(base × 2^(strikes−1), retry-after), max) and the next one is tried, with a
 * `fallback` notice; any other failure, or a non-timeout one after deltas, is raised as it is. When every
 * provider is frozen, the one whose freeze ends first is tried anyway (notice says so); if the
 * providers tried all fail, the last error is raised. A success clears that provider's strikes.
 */
export function fallback(providers: readonly ModelProvider[], options: FallbackOptions = {}): FallbackProvider {
  if (!Array.isArray(providers) || providers.length === 0)
    throw new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", "fallback() needs at least one provider.", {
      path: "providers",
    });
  const base = options.baseFreezeMs ?? 30_000;
  const max = options.maxFreezeMs ?? 600_000;
  if (!(base >= 0) || !(max >= base))
    throw new KeelError(
      "KEEL_PROVIDER_OPTIONS_INVALID",
      `fallback(): need 0 <= baseFreezeMs <= maxFreezeMs, got ${base} and ${max}.`,
      { path: "baseFreezeMs" },
    );
  const now = options.now ?? Date.now;
  const states: FreezeState[] = providers.map((p) => ({ id: p.id, frozenUntil: 0, strikes: 0 }));
  const windows = providers.map((p) => p.contextWindow).filter((w): w is number => typeof w === "number");

  async function* stream(request: ModelRequest, signal: AbortSignal): AsyncGenerator<ModelEvent> {
    const t = now();
    const order = providers.map((p, i) => ({ p, s: states[i]! }));
    let candidates = order.filter((c) => c.s.frozenUntil <= t);
    for (const c of order) {
      if (c.s.frozenUntil <= t || !candidates.length) break;
      yield {
        type: "notice",
        kind: "fallback",
        provider: c.p.id,
        message: `${c.p.id} is frozen for ${c.s.frozenUntil - t} ms more; skipped.`,
        data: { action: "skip", frozenForMs: c.s.frozenUntil - t, strikes: c.s.strikes },
      };
    }
    if (!candidates.length) {
      const least = order.reduce((a, b) => (b.s.frozenUntil < a.s.frozenUntil ? b : a));
      candidates = [least];
      yield {
        type: "notice",
        kind: "fallback",
        provider: least.p.id,
        message: `Every provider is frozen; trying ${least.p.id}, whose freeze ends first (in ${least.s.frozenUntil - t} ms).`,
        data: { action: "try_least_frozen", frozenForMs: least.s.frozenUntil - t },
      };
    }
    let last: ProviderError | undefined;
    for (const [k, c] of candidates.entries()) {
      let streamed = false;
      try {
        for await (const e of c.p.stream(request, { signal })) {
          if (e.type === "notice") {
            yield e.provider === undefined ? { ...e, provider: c.p.id } : e;
            continue;
          }
          streamed = true;
          yield e;
        }
        c.s.strikes = 0;
        c.s.frozenUntil = 0;
        return;
      } catch (err) {
        const e =
          err instanceof ProviderError
            ? err
            : new ProviderError("unknown", `${c.p.id}: ${err instanceof Error ? err.message : String(err)}`, {
                cause: err,
              });
        // A stall (`timeout`) fails over even after deltas: that answer will never finish, and only the final response enters history.
        if (
          signal.aborted ||
          (e.errorClass !== "rate_limited" && e.errorClass !== "overloaded" && e.errorClass !== "timeout") ||
          (streamed && e.errorClass !== "timeout")
        )
          throw e;
        c.s.strikes++;
        const freezeMs = Math.min(Math.max(base * 2 ** (c.s.strikes - 1), e.retryAfterMs ?? 0), max);
        c.s.frozenUntil = now() + freezeMs;
        const next = candidates[k + 1]?.p.id;
        yield {
          type: "notice",
          kind: "fallback",
          provider: c.p.id,
          message: `${c.p.id} failed (${e.errorClass}); frozen for ${freezeMs} ms. ${next ? `Trying ${next}.` : "No other provider is available."}${streamed && next ? " Deltas so far are void." : ""}`,
          data: {
            action: "freeze",
            errorClass: e.errorClass,
            freezeMs,
            strikes: c.s.strikes,
            ...(next ? { next } : {}),
            ...(streamed ? { afterDeltas: true } : {}),
          },
        };
        last = e;
      }
    }
    throw last!;
  }

  return {
    id: `fallback:${providers.map((p) => p.id).join("|")}`,
    ...(windows.length ? { contextWindow: Math.min(...windows) } : {}),
    ...chainPrice(providers),
    ...chainCeiling(providers),
    stream: (request, { signal }) => stream(request, signal),
    states: () => states.map((s) => ({ ...s })),
  };
}

/** A chain's output ceiling for budget estimates: the largest a member declares (any member may serve). */
function chainCeiling(providers: readonly ModelProvider[]): { maxOutputTokens?: number } {
  const ceilings = providers.flatMap((p) => (p.maxOutputTokens !== undefined ? [p.maxOutputTokens] : []));
  return ceilings.length ? { maxOutputTokens: Math.max(...ceilings) } : {};
}

/** A chain's price for budget estimates: the dearest member's (any member may serve), when every member has one. */
function chainPrice(providers: readonly ModelProvider[]): { price?: { input: number; output: number } } {
  if (!providers.every((p) => p.price)) return {};
  return {
    price: {
      input: Math.max(...providers.map((p) => p.price!.input)),
      output: Math.max(...providers.map((p) => p.price!.output)),
    },
  };
}
