static inline float sg_rsqrt(float x) { return 1.0f / sqrtf(x); }  // rsqrt(+-0) = +-inf, rsqrt(inf) = 0, x < 0: NaN
