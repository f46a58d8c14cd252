static inline float sg_tanh(float x) { return tanhf(x); }  // C99 F.9.2.6: tanh(+-inf) = +-1
