static inline float sg_exp(float x) { return expf(x); }  // C99 F.9.3.1: exp(NaN) = NaN, exp(-inf) = 0, exp(inf) = inf
