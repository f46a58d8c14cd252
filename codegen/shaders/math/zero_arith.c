// x * +-0, x / +-0 and +-0 / x: IEEE 754 arithmetic, which C keeps without -ffast-math (the GLSL and WGSL helpers
// compute it from x's bits because their compilers fold these)
static inline float sg_times_zero(float x) { return x * 0.0f; }
static inline float sg_times_negzero(float x) { return x * -0.0f; }
static inline float sg_over_zero(float x) { return x / 0.0f; }
static inline float sg_over_negzero(float x) { return x / -0.0f; }
static inline float sg_zero_over(float x) { return 0.0f / x; }
static inline float sg_negzero_over(float x) { return -0.0f / x; }
