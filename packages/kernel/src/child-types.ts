/** What a tool call's child sessions (ToolContext.child) carry between the loop and the host. */
import type { ApprovalAnswer, PendingApproval } from "./verdict.ts";

/** Child sessions of one call that wait for approval, by the order of their child() call, with the host's answers by their call ids. */
export type ChildResumes = Map<
  number,
  {
    sessionId: string;
    name: string;
    answers: Map<string, ApprovalAnswer>;
    /** The call was cut by a stopped process (recovery): the child goes on from its log instead of being asked again. */
    recover?: boolean;
  }
>;

/** One call's dealings with its children: which paused ones to resume, and which paused this time. */
export interface ChildHold {
  resume?: ChildResumes;
  paused?: PendingApproval[];
  /** child() calls made so far in this run of the call. */
  count?: number;
  /** The parent is done with this call: a child that pauses now is ended instead (nobody would answer). */
  closed?: boolean;
  /** The holds of the calls that run at once with this one (this one included): a child's default share of the budget is split among them. */
  group?: readonly ChildHold[];
  /** The call returned: it starts no more children. */
  done?: boolean;
}
