static inline float sg_sqrt(float x) { return sqrtf(x); }  // IEEE 754: sqrt(-0) = -0, sqrt(x < 0) = NaN
