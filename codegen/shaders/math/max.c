static inline float sg_max(float a, float b) {  // torch.maximum: NaN if either is NaN, else GLSL's max (b if a < b)
  return sg_isnan(a) || sg_isnan(b) ? sg_f32_bits(0x7fc00000u) : (a < b ? b : a);
}
