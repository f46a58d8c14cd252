static inline float sg_log(float x) { return logf(x); }  // C99 F.9.3.7: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf
