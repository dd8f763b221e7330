/** `--model SPEC`: the model (or fallback chain) that replaces the config's for one command. */
import { KeelError } from "@keel/kernel";
import { modelString } from "./config-schema.ts";

/**
 * The chain that `--model` values give: each value is one spec or several separated by commas,
 * in order (`--model a --model b` is `--model a,b`). Every spec is checked by the schema that
 * checks the config's `model` strings.
 * Contract: a non-empty list, or undefined when no `--model` was given; throws KEEL_CLI_USAGE at
 * `--model` (exit 2) naming the spec and what was expected, as a config's `model` error does.
 */
export function modelsFromFlags(values: readonly string[] | undefined): string[] | undefined {
  if (!values?.length) return undefined;
  const specs = values.flatMap((v) => v.split(",")).map((s) => s.trim());
  specs.forEach((spec, i) => {
    const r = modelString.safeParse(spec);
    if (r.success) return;
    const where = specs.length > 1 ? ` (model ${i + 1} of the chain ${JSON.stringify(specs.join(","))})` : "";
    throw new KeelError(
      "KEEL_CLI_USAGE",
      `--model: ${r.error.issues[0]?.message ?? "invalid model"} (found ${JSON.stringify(spec)})${where}.`,
      { path: "--model" },
    );
  });
  return specs;
}
