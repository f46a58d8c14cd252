// mulberry32 (Tommy Ettinger's 32-bit generator): a deterministic PRNG for the Node checks that need reproducible
// inputs (tests/fuzz/fuzz_bundle.mjs mutations, tests/webgpu_soak.mjs feeds). Same seed, same sequence on every
// platform.

/** A function returning the next value of seed `seed`'s sequence, uniform in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
