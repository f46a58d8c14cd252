// pow of a finite m > 0 and a finite b as exp(b log m) with log m and the product b log m in two floats
// (hi + lo): GLSL's pow, exp2(b log2 m), loses the low bits of log2 m near 1, which |b| = 1e4 amplifies
float sg_split_hi(float x) { return uintBitsToFloat(floatBitsToUint(x) & 0xfffff000u); }  // the top 12 bits
vec2 sg_two_prod(float a, float b) {  // (p, e) with p + e = a b (Dekker: exact partial products, FMA-proof)
  float p = a * b, ah = sg_split_hi(a), al = a - ah, bh = sg_split_hi(b), bl = b - bh;
  return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}
vec2 sg_log_hilo(float m) {  // log m = e ln 2 + 2 atanh(s), s = (f - 1) / (f + 1), f in [0.707, 1.414]: as hi + lo
  uint u = floatBitsToUint(m);
  int e = 0;
  if (u < 0x00800000u) { u = floatBitsToUint(m * 16777216.0); e = -24; }  // subnormal m
  e += int(u >> 23) - 127;
  float f = uintBitsToFloat((u & 0x007fffffu) | 0x3f800000u);
  if (f > 1.41421354) { f *= 0.5; e += 1; }
  float g = f - 1.0, d = 2.0 + g, dl = g - (d - 2.0);  // g exact; d + dl = 2 + g exactly
  float s = g / d;
  vec2 sd = sg_two_prod(s, d);
  float sl = (((g - sd.x) - sd.y) - s * dl) / d;  // s + sl = g / (2 + g)
  float z = s * s;
  float tail = 2.0 * s * z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 +
               z * (0.0909090936 + z * 0.0769230798)))));
  float eh = float(e) * 0.693145752, hi = eh + 2.0 * s;  // e * ln2's first part is exact (|e| < 2^8)
  float bv = hi - eh, err = (eh - (hi - bv)) + (2.0 * s - bv);  // two-sum
  float lo = err + 2.0 * sl + tail + float(e) * 1.42860677e-6;
  float h = hi + lo;
  return vec2(h, lo - (h - hi));
}
float sg_pow_finite(float m, float b) {
  vec2 l = sg_log_hilo(m);
  vec2 t = sg_two_prod(b, l.x);
  if (t.x > 89.0) return uintBitsToFloat(0x7f800000u);
  if (t.x < -104.0) return 0.0;
  float tl = t.y + b * l.y;
  float n = roundEven(t.x * 1.44269502);  // exp(t.x + tl) = 2^n exp(r), ln 2 in two parts as in sg_exp
  float r = ((t.x - n * 0.693145752) - n * 1.42860677e-6) + tl;
  int k = int(n), kh = k >> 1;
  return exp(r) * sg_exp2i(kh) * sg_exp2i(k - kh);
}
float sg_pow(float a, float b) {  // torch.pow (C99's pow: every special case); GLSL's pow is undefined for a <= 0
  if (b == 0.0 || a == 1.0) return 1.0;  // also for a NaN other operand
  if (sg_isnan(a) || sg_isnan(b)) return uintBitsToFloat(0x7fc00000u);
  float m = abs(a);
  bool b_int = !sg_isinf(b) && floor(b) == b;
  bool b_odd = b_int && abs(b) < 16777216.0 && mod(b, 2.0) == 1.0;
  float r;
  if (sg_isinf(b)) r = m == 1.0 ? 1.0 : ((m < 1.0) == (b < 0.0) ? uintBitsToFloat(0x7f800000u) : 0.0);
  else if (m == 0.0) r = b < 0.0 ? uintBitsToFloat(0x7f800000u) : 0.0;
  else if (sg_isinf(m)) r = b < 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
  else r = sg_pow_finite(m, b);
  if (!sg_signbit(a) || sg_isinf(b)) return r;
  if (m != 0.0 && !sg_isinf(m) && !b_int) return uintBitsToFloat(0x7fc00000u);  // a negative base, b not an integer
  return b_odd ? -r : r;
}
