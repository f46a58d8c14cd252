static inline float sg_sin(float x) { return sinf(x); }  // C99: sin(+-inf) = NaN; glibc reduces large |x| exactly
static inline float sg_cos(float x) { return cosf(x); }
