/**
 * One turn's retry accounting, apart from the plugin so it can be replayed on recorded
 * trajectories (bench): failures counted per signature (tool + normalised arguments + class)
 * and per tool and class; a call out of retries is blocked until a state-changing call succeeds.
 */
import type { FailureClass } from "./classify.ts";
import { DEFAULT_BUDGETS } from "./classify.ts";

/** Budgets as the ledger reads them. Contract: whole numbers ≥ 0. */
export interface LedgerLimits {
  budgets?: Partial<Record<FailureClass, number>>;
  maxPerSignature: number;
  tools?: Record<string, { budgets?: Partial<Record<FailureClass, number>>; maxPerSignature?: number }>;
}

/** What one failure leaves. Contract: `left` ≤ 0 means the call is now blocked. */
export interface FailureVerdict {
  cls: FailureClass;
  failures: number;
  failuresOfClass: number;
  budget: number;
  left: number;
}

export class RetryLedger {
  readonly #limits: LedgerLimits;
  readonly #bySignature = new Map<string, number>();
  readonly #byToolClass = new Map<string, number>();
  readonly #blocked = new Map<string, { cls: FailureClass; failures: number }>();

  constructor(limits: LedgerLimits) {
    this.#limits = limits;
  }

  /**
   * A call that may change state (not an information tool) succeeded: earlier failures may not
   * repeat now (a file was written, a record fixed), so every count and block starts afresh.
   */
  changed(): void {
    this.#bySignature.clear();
    this.#byToolClass.clear();
    this.#blocked.clear();
  }

  /** True when some call is out of retries (else no call needs its arguments normalised). */
  get hasBlocks(): boolean {
    return this.#blocked.size > 0;
  }

  /** The call (tool, normalised args) is out of retries: why, or undefined. */
  blocked(tool: string, args: string): { cls: FailureClass; failures: number } | undefined {
    return this.#blocked.get(`${tool}\u0000${args}`);
  }

  /** Count a failure. Contract: retries left are the smaller of the class's and the signature's. */
  failed(tool: string, args: string, cls: FailureClass): FailureVerdict {
    const sig = `${tool}\u0000${args}\u0000${cls}`;
    const failures = (this.#bySignature.get(sig) ?? 0) + 1;
    this.#bySignature.set(sig, failures);
    const tc = `${tool}\u0000${cls}`;
    const failuresOfClass = (this.#byToolClass.get(tc) ?? 0) + 1;
    this.#byToolClass.set(tc, failuresOfClass);
    const t = this.#limits.tools?.[tool];
    const budget = t?.budgets?.[cls] ?? this.#limits.budgets?.[cls] ?? DEFAULT_BUDGETS[cls];
    const perSignature = t?.maxPerSignature ?? this.#limits.maxPerSignature;
    const left = Math.min(budget - (failuresOfClass - 1), perSignature - (failures - 1));
    if (left <= 0) this.#blocked.set(`${tool}\u0000${args}`, { cls, failures });
    return { cls, failures, failuresOfClass, budget, left };
  }
}
