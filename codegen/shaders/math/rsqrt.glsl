float sg_rsqrt(float x) {  // 1/sqrt(x); GLSL's inversesqrt is undefined for x <= 0
  if (x > 0.0) return inversesqrt(x);
  if (x == 0.0) return sg_signbit(x) ? uintBitsToFloat(0xff800000u) : uintBitsToFloat(0x7f800000u);
  return uintBitsToFloat(0x7fc00000u);
}
