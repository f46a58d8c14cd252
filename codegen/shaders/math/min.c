static inline float sg_min(float a, float b) {  // torch.minimum: NaN if either is NaN, else GLSL's min (b if b < a)
  return sg_isnan(a) || sg_isnan(b) ? sg_f32_bits(0x7fc00000u) : (b < a ? b : a);
}
