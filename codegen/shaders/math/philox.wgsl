// Philox-4x32-10 (J. K. Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), bit for bit as
// sg/philox.h (the CPU reference): element `index` of random_uniform at step `step` is word 0 of the 10 rounds of
// counter (index, 0, step, stream) under key (k0, k1), its top 24 bits times 2^-24 (exact in f32). The rounds are
// written out (no loop: llvmpipe counts every loop iteration of an invocation against one budget). The high word of
// each 32x32-bit product comes from 16-bit halves: GLSL ES 3.00 has no umulExtended and WGSL has no mulhi.
fn sg_umulhi(a: u32, b: u32) -> u32 {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let m1 = a1 * b0; let m2 = a0 * b1;
  let mid = ((a0 * b0) >> 16u) + (m1 & 0xffffu) + (m2 & 0xffffu);  // < 3 * 2^16: no wrap
  return a1 * b1 + (m1 >> 16u) + (m2 >> 16u) + (mid >> 16u);
}
// one round: the products of words 0 and 2 by M0 = 0xD2511F53 and M1 = 0xCD9E8D57, their high words mixed with the key
fn sg_philox_round(c: vec4<u32>, k: vec2<u32>) -> vec4<u32> {
  return vec4<u32>(sg_umulhi(0xCD9E8D57u, c.z) ^ c.y ^ k.x, 0xCD9E8D57u * c.z, sg_umulhi(0xD2511F53u, c.x) ^ c.w ^ k.y,
                   0xD2511F53u * c.x);
}
fn sg_philox_uniform(index: i32, step: i32, stream: u32, k0: u32, k1: u32) -> f32 {
  var c = vec4<u32>(u32(index), 0u, u32(step), stream);
  var k = vec2<u32>(k0, k1);
  let w = vec2<u32>(0x9E3779B9u, 0xBB67AE85u);  // the key is bumped by w between rounds
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);  k = k + w;
  c = sg_philox_round(c, k);
  return f32(c.x >> 8u) * 5.9604644775390625e-8;  // 2^-24
}
