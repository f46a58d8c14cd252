// C99 F.9.5.1-2: erf(+-inf) = +-1, erf(-0) = -0, erfc(-inf) = 2, erfc(inf) = +0, NaN propagates (torch's values)
static inline float sg_erf(float x) { return erff(x); }
static inline float sg_erfc(float x) { return erfcf(x); }
