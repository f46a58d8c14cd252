// x * +-0, x / +-0 and +-0 / x by IEEE 754 from x's bits: compilers fold x * 0.0 and 0.0 / x to 0, x / 0.0 too
fn sg_signed_zero(neg: bool) -> f32 { return sg_f32_bits(select(0u, 0x80000000u, neg)); }
fn sg_signed_inf(neg: bool) -> f32 { return sg_f32_bits(select(0x7f800000u, 0xff800000u, neg)); }
fn sg_iszero(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0u; }
fn sg_zero_product(x: f32, neg: bool) -> f32 {
  return select(sg_signed_zero(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_isinf(x));
}
fn sg_zero_quotient(x: f32, neg: bool) -> f32 {  // x / +-0
  return select(sg_signed_inf(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_iszero(x));
}
fn sg_zero_dividend(x: f32, neg: bool) -> f32 {  // +-0 / x
  return select(sg_signed_zero(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_iszero(x));
}
fn sg_times_zero(x: f32) -> f32 { return sg_zero_product(x, false); }
fn sg_times_negzero(x: f32) -> f32 { return sg_zero_product(x, true); }
fn sg_over_zero(x: f32) -> f32 { return sg_zero_quotient(x, false); }
fn sg_over_negzero(x: f32) -> f32 { return sg_zero_quotient(x, true); }
fn sg_zero_over(x: f32) -> f32 { return sg_zero_dividend(x, false); }
fn sg_negzero_over(x: f32) -> f32 { return sg_zero_dividend(x, true); }
