/**
 * Seeded randomness for the router: a small-state PRNG (sfc32, seeded through splitmix32),
 * standard normals, Gamma by Marsaglia–Tsang and Beta as a ratio of Gammas.
 */

/**
 * A deterministic pseudo-random source.
 * Contract: the same seed gives the same sequence; `next()` is uniform in [0, 1).
 */
export interface Rng {
  next(): number;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** Hash a string seed to 32 bits (FNV-1a). */
function hashSeed(seed: number | string): number {
  if (typeof seed === "number") return (seed >>> 0) ^ Math.floor(seed / 2 ** 32);
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * A seeded PRNG (sfc32). Contract: deterministic for a given seed; period well beyond any
 * run of the router; without a seed, seeded from Math.random.
 */
export function createRng(seed?: number | string): Rng {
  const mix = splitmix32(seed === undefined ? Math.floor(Math.random() * 2 ** 32) : hashSeed(seed));
  let a = mix(),
    b = mix(),
    c = mix(),
    d = mix();
  const rng: Rng = {
    next() {
      const t = (((a + b) >>> 0) + d) >>> 0;
      d = (d + 1) >>> 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) >>> 0;
      c = ((c << 21) | (c >>> 11)) >>> 0;
      c = (c + t) >>> 0;
      return t / 4294967296;
    },
  };
  for (let i = 0; i < 12; i++) rng.next();
  return rng;
}

/** A standard normal draw (Marsaglia polar method). */
export function sampleNormal(rng: Rng): number {
  for (;;) {
    const u = 2 * rng.next() - 1;
    const v = 2 * rng.next() - 1;
    const s = u * u + v * v;
    if (s > 0 && s < 1) return u * Math.sqrt((-2 * Math.log(s)) / s);
  }
}

/**
 * A Gamma(shape, 1) draw (Marsaglia–Tsang; shapes below 1 boosted by U^(1/shape)).
 * Contract: shape > 0, result > 0 (or 0 by underflow for tiny shapes).
 */
export function sampleGamma(rng: Rng, shape: number): number {
  if (!(shape > 0)) throw new RangeError(`Gamma shape must be > 0, got ${shape}`);
  if (shape < 1) {
    const u = rng.next();
    return sampleGamma(rng, shape + 1) * (u === 0 ? Number.MIN_VALUE : u) ** (1 / shape);
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = sampleNormal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = rng.next();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** A Beta(a, b) draw as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b). Contract: a, b > 0; result in [0, 1]. */
export function sampleBeta(rng: Rng, a: number, b: number): number {
  const x = sampleGamma(rng, a);
  const y = sampleGamma(rng, b);
  const s = x + y;
  return s > 0 ? x / s : a / (a + b);
}
