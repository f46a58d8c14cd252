// Philox-4x32-10 (J. K. Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), bit for bit as
// sg/philox.h (the CPU reference): element `index` of random_uniform at step `step` is word 0 of the 10 rounds of
// counter (index, 0, step, stream) under key (k0, k1), its top 24 bits times 2^-24 (exact in f32). The rounds are
// written out (no loop: llvmpipe counts every loop iteration of an invocation against one budget). The high word of
// each 32x32-bit product comes from 16-bit halves: GLSL ES 3.00 has no umulExtended and WGSL has no mulhi.
uint sg_umulhi(uint a, uint b) {
  uint a0 = a & 0xffffu, a1 = a >> 16u, b0 = b & 0xffffu, b1 = b >> 16u;
  uint m1 = a1 * b0, m2 = a0 * b1;
  uint mid = ((a0 * b0) >> 16u) + (m1 & 0xffffu) + (m2 & 0xffffu);  // < 3 * 2^16: no wrap
  return a1 * b1 + (m1 >> 16u) + (m2 >> 16u) + (mid >> 16u);
}
// one round: the products of words 0 and 2 by M0 = 0xD2511F53 and M1 = 0xCD9E8D57, their high words mixed with the key
uvec4 sg_philox_round(uvec4 c, uvec2 k) {
  return uvec4(sg_umulhi(0xCD9E8D57u, c.z) ^ c.y ^ k.x, 0xCD9E8D57u * c.z, sg_umulhi(0xD2511F53u, c.x) ^ c.w ^ k.y,
               0xD2511F53u * c.x);
}
float sg_philox_uniform(int index, int step, uint stream, uint k0, uint k1) {
  uvec4 c = uvec4(uint(index), 0u, uint(step), stream);
  uvec2 k = uvec2(k0, k1), w = uvec2(0x9E3779B9u, 0xBB67AE85u);  // the key is bumped by w between rounds
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);  k += w;
  c = sg_philox_round(c, k);
  return float(c.x >> 8u) * 5.9604644775390625e-8;  // 2^-24
}
