// x * +-0, x / +-0 and +-0 / x by IEEE 754 from x's bits: compilers fold x * 0.0 and 0.0 / x to 0, x / 0.0 too
float sg_signed_zero(bool neg) { return uintBitsToFloat(neg ? 0x80000000u : 0u); }
float sg_signed_inf(bool neg) { return uintBitsToFloat(neg ? 0xff800000u : 0x7f800000u); }
bool sg_iszero(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0u; }
float sg_zero_product(float x, bool neg) {
  return sg_isnan(x) || sg_isinf(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_zero(sg_signbit(x) != neg);
}
float sg_zero_quotient(float x, bool neg) {  // x / +-0
  return sg_isnan(x) || sg_iszero(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_inf(sg_signbit(x) != neg);
}
float sg_zero_dividend(float x, bool neg) {  // +-0 / x
  return sg_isnan(x) || sg_iszero(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_zero(sg_signbit(x) != neg);
}
float sg_times_zero(float x) { return sg_zero_product(x, false); }
float sg_times_negzero(float x) { return sg_zero_product(x, true); }
float sg_over_zero(float x) { return sg_zero_quotient(x, false); }
float sg_over_negzero(float x) { return sg_zero_quotient(x, true); }
float sg_zero_over(float x) { return sg_zero_dividend(x, false); }
float sg_negzero_over(float x) { return sg_zero_dividend(x, true); }
