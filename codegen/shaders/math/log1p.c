static inline float sg_log1p(float x) { return log1pf(x); }  // C99 F.9.3.9: log1p(-1) = -inf, below -1 NaN
