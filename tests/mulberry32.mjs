// mulberry32 (Tommy Ettinger's 32-bit generator): the deterministic PRNG of the Node checks that need reproducible
// inputs (tests/fuzz/fuzz_bundle.mjs mutations, tests/webgpu_soak.mjs feeds). One copy: the shapes page's `rng`
// (examples/web/shapes/frames.js), which draws its frames with it. Same seed, same sequence on every platform.

/** mulberry32(seed): a function returning the next value of seed `seed`'s sequence, uniform in [0, 1). */
export { rng as mulberry32 } from '../examples/web/shapes/frames.js';
