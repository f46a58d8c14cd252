fn sg_rsqrt(x: f32) -> f32 {  // 1/sqrt(x); WGSL's inverseSqrt is indeterminate for x <= 0
  if (x > 0.0) { return inverseSqrt(x); }
  if (x == 0.0) { return select(sg_f32_bits(0x7f800000u), sg_f32_bits(0xff800000u), sg_signbit(x)); }
  return sg_f32_bits(0x7fc00000u);
}
