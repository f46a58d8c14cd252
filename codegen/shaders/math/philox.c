// Philox-4x32-10 (J. K. Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), bit for bit as
// sg/philox.h (the CPU reference) and philox.glsl: element `index` of random_uniform at step `step` is word 0 of the 10
// rounds of counter (index, 0, step, stream) under key (k0, k1), its top 24 bits times 2^-24 (exact in f32).
static inline uint32_t sg_umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline float sg_philox_uniform(int index, int step, uint32_t stream, uint32_t k0, uint32_t k1) {
  uint32_t c0 = (uint32_t)index, c1 = 0u, c2 = (uint32_t)step, c3 = stream;
  for (int r = 0; r < 10; ++r) {  // one round: words 0 and 2 times M0 = 0xD2511F53 and M1 = 0xCD9E8D57
    const uint32_t n0 = sg_umulhi(0xCD9E8D57u, c2) ^ c1 ^ k0, n1 = 0xCD9E8D57u * c2;
    const uint32_t n2 = sg_umulhi(0xD2511F53u, c0) ^ c3 ^ k1, n3 = 0xD2511F53u * c0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;  // the key is bumped between rounds
  }
  return (float)(c0 >> 8u) * 5.9604644775390625e-8f;  // 2^-24
}
