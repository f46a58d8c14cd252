// NaN by its bits: x != x and isnan() may be folded to false by compilers that assume no NaNs
bool sg_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool sg_isinf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }
bool sg_signbit(float x) { return floatBitsToUint(x) >= 0x80000000u; }
