fn sg_max(a: f32, b: f32) -> f32 {  // torch.maximum: NaN if either is NaN (WGSL's max may return the other)
  return select(max(a, b), sg_f32_bits(0x7fc00000u), sg_isnan(a) || sg_isnan(b));
}
