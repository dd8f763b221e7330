/** Three skills whose descriptions cannot tell "ledger" from "verse". */
export const SKILLS = [
  { name: "ledger", description: "Works with documents and records." },
  { name: "verse", description: "Works with documents and records." },
  { name: "travel", description: "Plans trips, flights and hotel bookings." },
];
