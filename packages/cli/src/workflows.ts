/** `keel workflows`: the workflows the agent learned (@keel/plugin-workflows), reviewed and revoked like skill drafts. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { KeelError } from "@keel/kernel";
import { countOf, headOf } from "@keel/text";
import type { CliEnv } from "./stdio.ts";

const usage = (problem: string) => new KeelError("KEEL_CLI_USAGE", problem);

/** Run `keel workflows [list | show ID | review ID | revoke ID]` against `<home>/workflows.sqlite`. Contract: list and show never create the file. */
export async function workflowsCommand(
  rest: readonly string[],
  io: CliEnv,
  home: string,
  json: boolean,
): Promise<number> {
  const [sub = "list", id, ...extra] = rest;
  if (extra.length) throw usage(`keel workflows ${sub} takes one id (got "${headOf(extra.join(" "), 60)}").`);
  if (!["list", "show", "review", "revoke"].includes(sub))
    throw usage(`keel workflows takes list, show ID, review ID or revoke ID, not "${headOf(sub, 40)}".`);
  if (sub !== "list" && !id) throw usage(`keel workflows ${sub} needs a workflow id (keel workflows lists them).`);
  const file = join(home, "workflows.sqlite");
  if (!existsSync(file)) {
    if (sub !== "list")
      throw new KeelError(
        "KEEL_CLI_USAGE",
        `No workflow "${id}": ${file} does not exist yet (the workflows plugin writes it once it learns one).`,
      );
    io.out(json ? "[]\n" : `No workflows learned yet (${file} does not exist).\n`);
    return 0;
  }
  const { WorkflowStore } = await import("@keel/plugin-workflows");
  const store = new WorkflowStore(file);
  try {
    const all = store.all();
    if (sub === "list") {
      if (json) io.out(`${JSON.stringify(all)}\n`);
      else if (!all.length) io.out("No workflows learned yet.\n");
      else
        for (const w of all)
          io.out(
            `${w.workflow.id}  ${w.reviewed ? "reviewed" : "draft   "}  ${w.namespace}  ${w.workflow.name}  (${countOf(w.workflow.examples, "turn")}; offers accepted ${w.accepted}, declined ${w.declined})\n`,
          );
      return 0;
    }
    const found = all.find((w) => w.workflow.id === id);
    if (!found) throw usage(`No workflow "${headOf(id!, 60)}" in ${file} (keel workflows lists them).`);
    if (sub === "show") {
      io.out(`${JSON.stringify(found, null, 2)}\n`);
      return 0;
    }
    if (sub === "review") store.review(id!);
    else store.revoke(id!);
    io.out(
      sub === "review"
        ? `Reviewed ${id}: it is offered in every namespace now.\n`
        : `Revoked ${id}: deleted, and its tool sequence is never learned again in ${found.namespace}.\n`,
    );
    return 0;
  } finally {
    store.close();
  }
}
