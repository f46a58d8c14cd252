// 2 atanh(s) = log((1 + s) / (1 - s)) = 2 s P(s^2) by its series, |s| <= 0.15: this is P(z)
fn sg_atanh_poly(z: f32) -> f32 {
  return 1.0 + z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 + z * 0.0909090936))));
}
fn sg_log(x: f32) -> f32 {  // log near 1 by the series of s = (x - 1) / (x + 1) (x - 1 is exact there); C99's values at 0, < 0, inf
  if (x > 0.8 && x < 1.25) {
    let s = (x - 1.0) / (x + 1.0);
    return 2.0 * s * sg_atanh_poly(s * s);
  }
  if (x > 0.0) { return select(log(x), x, sg_isinf(x)); }
  return select(sg_f32_bits(0x7fc00000u), sg_f32_bits(0xff800000u), x == 0.0);
}
