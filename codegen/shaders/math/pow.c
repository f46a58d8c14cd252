static inline float sg_pow(float a, float b) { return powf(a, b); }  // C99 F.9.4.4: every special case (torch.pow's)
