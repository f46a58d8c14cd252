// 2^k as a float from its bits, -126 <= k <= 127
float sg_exp2i(int k) { return uintBitsToFloat(uint(k + 127) << 23); }
float sg_exp(float x) {  // exp(x) = 2^n exp(r), r = x - n ln 2 in two parts (n * 0.693145752 is exact)
  if (sg_isnan(x)) return x;
  if (x > 88.7228394) return uintBitsToFloat(0x7f800000u);
  if (x < -103.972076) return 0.0;
  float n = roundEven(x * 1.44269502);
  float r = (x - n * 0.693145752) - n * 1.42860677e-6;
  int k = int(n), h = k >> 1;  // 2^k in two factors: each a normal float
  return exp(r) * sg_exp2i(h) * sg_exp2i(k - h);
}
