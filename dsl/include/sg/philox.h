// shadergrad — the counter-based random number generator of sg::random_uniform, bernoulli and dropout.
//
// Philox-4x32-10 (J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011; the generator of torch's CUDA backend, cuRAND and JAX): a keyed bijection of a 128-bit counter, 10 rounds
// of two 32x32 -> 64-bit multiplications (M0 = 0xD2511F53, M1 = 0xCD9E8D57) with the key bumped by the Weyl
// constants (0x9E3779B9, 0xBB67AE85) between rounds, as Random123's philox4x32_R(10, ctr, key). Random123's
// known-answer vectors (tests/kat_vectors) check it (tests/test_random.cpp).
//
// Every element of a random tensor is a pure function of (seed, stream, step, element index): the CPU reference
// calls the functions below, the GPU kernels call the same algorithm in GLSL and WGSL (codegen/shaders/math/
// philox.glsl and .wgsl, the 32x32 -> 64-bit product's high word from 16-bit halves: GLSL ES 3.00 has no
// umulExtended, WGSL no mulhi), so every backend produces the same bits. Layout:
//   key     = (seed & 0xffffffff, seed >> 32)
//   counter = (element flat index (row-major), 0, step, stream)
//   u       = (word 0 of philox4x32_10(counter, key) >> 8) * 2^-24, in [0, 1), exact in f32
#pragma once

#include <array>
#include <cstdint>

namespace sg {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Philox-4x32 with 10 rounds (Random123's philox4x32_R(10, ctr, key)): e.g. counter 0, key 0 ->
/// {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k = {k[0] + kW0, k[1] + kW1};
    const uint64_t p0 = uint64_t{kM0} * c[0], p1 = uint64_t{kM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

/// The Philox key of a 64-bit seed: (low word, high word).
constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

/// Element `index` of sg::random_uniform(shape, seed, step) with stream `stream` at step `step`: the top 24 bits of
/// word 0 of philox4x32_10({index, 0, step, stream}, philox_key(seed)) times 2^-24, in [0, 1 - 2^-24].
constexpr float philox_uniform(uint64_t seed, uint32_t stream, uint32_t step, uint32_t index) {
  const PhiloxCounter r = philox4x32_10({index, 0u, step, stream}, philox_key(seed));
  return static_cast<float>(r[0] >> 8) * 0x1p-24f;
}

}  // namespace sg
