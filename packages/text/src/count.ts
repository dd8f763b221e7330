/**
 * A count with its noun, agreeing in number: `countOf(1, "round")` is "1 round",
 * `countOf(3, "round")` "3 rounds", `countOf(2, "entry", "entries")` "2 entries".
 * Contract: singular exactly when `n` is 1 (0, fractions and negatives take the plural, as in
 * English); the number is printed as given; never throws.
 */
export function countOf(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
