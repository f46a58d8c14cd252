fn sg_min(a: f32, b: f32) -> f32 {  // torch.minimum: NaN if either is NaN
  return select(min(a, b), sg_f32_bits(0x7fc00000u), sg_isnan(a) || sg_isnan(b));
}
