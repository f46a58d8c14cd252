// The SOp -> GLSL / WGSL table the emitters print float math with, and its helper functions (glsl_math.h): each
// formula and each helper is written for both languages side by side, the WGSL one mirroring the GLSL one.
//
// Constants: pi/2 = 1.5703125 + 4.84466553e-4 - 6.40749931e-7 + 9.92093518e-10 (the first three of 8 significant
// bits, so k * part is exact for |k| < 2^16), ln 2 = 0.693145752 + 1.42860677e-6 (16 bits, then the rest); the
// polynomials are the Taylor series of sin, cos and tanh (coefficients 1/n!, and tanh's from its series in the
// Bernoulli numbers) and of 2 atanh(s) = log((1 + s) / (1 - s)), truncated where the next term is below 1e-8
// relative on their intervals.
#include "glsl_math.h"

#include <fmt/format.h>

namespace sg {

namespace {

constexpr const char* kNaN = "uintBitsToFloat(0x7fc00000u)";

struct HelperDef {
  const char* names;   // the functions it defines, comma-separated (for the vec4 overloads)
  int arity;           // of each function (1 or 2); 0: no vec4 overload
  const char* source;  // the scalar definitions (GLSL)
  const char* wgsl;    // the same in WGSL (NaN/Inf through sg_f32_bits: WGSL rejects non-finite constants)
};

// In dependency order: a helper only calls helpers defined above it.
const HelperDef& helper_def(MathHelper h) {
  static const HelperDef defs[] = {
      {"", 0,
       "// NaN by its bits: x != x and isnan() may be folded to false by compilers that assume no NaNs\n"
       "bool sg_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }\n"
       "bool sg_isinf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }\n"
       "bool sg_signbit(float x) { return floatBitsToUint(x) >= 0x80000000u; }\n",
       // WGSL
       "// NaN by its bits: x != x may be folded to false (WGSL lets implementations assume no NaNs)\n"
       "fn sg_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n"
       "fn sg_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }\n"
       "fn sg_signbit(x: f32) -> bool { return bitcast<u32>(x) >= 0x80000000u; }\n"},
      {"sg_max", 2,
       "float sg_max(float a, float b) {  // torch.maximum: NaN if either is NaN (GLSL's max may return the other)\n"
       "  return sg_isnan(a) || sg_isnan(b) ? uintBitsToFloat(0x7fc00000u) : max(a, b);\n}\n",
       // WGSL
       "fn sg_max(a: f32, b: f32) -> f32 {  // torch.maximum: NaN if either is NaN (WGSL's max may return the other)\n"
       "  return select(max(a, b), sg_f32_bits(0x7fc00000u), sg_isnan(a) || sg_isnan(b));\n"
       "}\n"},
      {"sg_min", 2,
       "float sg_min(float a, float b) {  // torch.minimum: NaN if either is NaN\n"
       "  return sg_isnan(a) || sg_isnan(b) ? uintBitsToFloat(0x7fc00000u) : min(a, b);\n}\n",
       // WGSL
       "fn sg_min(a: f32, b: f32) -> f32 {  // torch.minimum: NaN if either is NaN\n"
       "  return select(min(a, b), sg_f32_bits(0x7fc00000u), sg_isnan(a) || sg_isnan(b));\n"
       "}\n"},
      {"sg_relu,sg_sign", 1,
       "float sg_relu(float x) { return sg_isnan(x) ? x : max(x, 0.0); }  // torch.relu(NaN) = NaN\n"
       "float sg_sign(float x) { return sg_isnan(x) ? x : sign(x); }\n",
       // WGSL
       "fn sg_relu(x: f32) -> f32 { return select(max(x, 0.0), x, sg_isnan(x)); }  // torch.relu(NaN) = NaN\n"
       "fn sg_sign(x: f32) -> f32 { return select(sign(x), x, sg_isnan(x)); }\n"},
      {"", 0, nullptr, nullptr},  // ArgBetter: argmax_helper_source (glsl_argmax.cpp)
      {"sg_times_zero,sg_times_negzero,sg_over_zero,sg_over_negzero,sg_zero_over,sg_negzero_over", 1,
       "// x * +-0, x / +-0 and +-0 / x by IEEE 754 from x's bits: compilers fold x * 0.0 and 0.0 / x to 0, x / 0.0 too\n"
       "float sg_signed_zero(bool neg) { return uintBitsToFloat(neg ? 0x80000000u : 0u); }\n"
       "float sg_signed_inf(bool neg) { return uintBitsToFloat(neg ? 0xff800000u : 0x7f800000u); }\n"
       "bool sg_iszero(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0u; }\n"
       "float sg_zero_product(float x, bool neg) {\n"
       "  return sg_isnan(x) || sg_isinf(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_zero(sg_signbit(x) != neg);\n}\n"
       "float sg_zero_quotient(float x, bool neg) {  // x / +-0\n"
       "  return sg_isnan(x) || sg_iszero(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_inf(sg_signbit(x) != neg);\n}\n"
       "float sg_zero_dividend(float x, bool neg) {  // +-0 / x\n"
       "  return sg_isnan(x) || sg_iszero(x) ? uintBitsToFloat(0x7fc00000u) : sg_signed_zero(sg_signbit(x) != neg);\n}\n"
       "float sg_times_zero(float x) { return sg_zero_product(x, false); }\n"
       "float sg_times_negzero(float x) { return sg_zero_product(x, true); }\n"
       "float sg_over_zero(float x) { return sg_zero_quotient(x, false); }\n"
       "float sg_over_negzero(float x) { return sg_zero_quotient(x, true); }\n"
       "float sg_zero_over(float x) { return sg_zero_dividend(x, false); }\n"
       "float sg_negzero_over(float x) { return sg_zero_dividend(x, true); }\n",
       // WGSL
       "// x * +-0, x / +-0 and +-0 / x by IEEE 754 from x's bits: compilers fold x * 0.0 and 0.0 / x to 0, x / 0.0 too\n"
       "fn sg_signed_zero(neg: bool) -> f32 { return sg_f32_bits(select(0u, 0x80000000u, neg)); }\n"
       "fn sg_signed_inf(neg: bool) -> f32 { return sg_f32_bits(select(0x7f800000u, 0xff800000u, neg)); }\n"
       "fn sg_iszero(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0u; }\n"
       "fn sg_zero_product(x: f32, neg: bool) -> f32 {\n"
       "  return select(sg_signed_zero(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_isinf(x));\n"
       "}\n"
       "fn sg_zero_quotient(x: f32, neg: bool) -> f32 {  // x / +-0\n"
       "  return select(sg_signed_inf(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_iszero(x));\n"
       "}\n"
       "fn sg_zero_dividend(x: f32, neg: bool) -> f32 {  // +-0 / x\n"
       "  return select(sg_signed_zero(sg_signbit(x) != neg), sg_f32_bits(0x7fc00000u), sg_isnan(x) || sg_iszero(x));\n"
       "}\n"
       "fn sg_times_zero(x: f32) -> f32 { return sg_zero_product(x, false); }\n"
       "fn sg_times_negzero(x: f32) -> f32 { return sg_zero_product(x, true); }\n"
       "fn sg_over_zero(x: f32) -> f32 { return sg_zero_quotient(x, false); }\n"
       "fn sg_over_negzero(x: f32) -> f32 { return sg_zero_quotient(x, true); }\n"
       "fn sg_zero_over(x: f32) -> f32 { return sg_zero_dividend(x, false); }\n"
       "fn sg_negzero_over(x: f32) -> f32 { return sg_zero_dividend(x, true); }\n"},
      {"sg_exp", 1,
       "// 2^k as a float from its bits, -126 <= k <= 127\n"
       "float sg_exp2i(int k) { return uintBitsToFloat(uint(k + 127) << 23); }\n"
       "float sg_exp(float x) {  // exp(x) = 2^n exp(r), r = x - n ln 2 in two parts (n * 0.693145752 is exact)\n"
       "  if (sg_isnan(x)) return x;\n"
       "  if (x > 88.7228394) return uintBitsToFloat(0x7f800000u);\n"
       "  if (x < -103.972076) return 0.0;\n"
       "  float n = roundEven(x * 1.44269502);\n"
       "  float r = (x - n * 0.693145752) - n * 1.42860677e-6;\n"
       "  int k = int(n), h = k >> 1;  // 2^k in two factors: each a normal float\n"
       "  return exp(r) * sg_exp2i(h) * sg_exp2i(k - h);\n}\n",
       // WGSL
       "// 2^k as a float from its bits, -126 <= k <= 127\n"
       "fn sg_exp2i(k: i32) -> f32 { return bitcast<f32>(u32(k + 127) << 23u); }\n"
       "fn sg_exp(x: f32) -> f32 {  // exp(x) = 2^n exp(r), r = x - n ln 2 in two parts (n * 0.693145752 is exact)\n"
       "  if (sg_isnan(x)) { return x; }\n"
       "  if (x > 88.7228394) { return sg_f32_bits(0x7f800000u); }\n"
       "  if (x < -103.972076) { return 0.0; }\n"
       "  let n = round(x * 1.44269502);\n"
       "  let r = (x - n * 0.693145752) - n * 1.42860677e-6;\n"
       "  let k = i32(n);\n"
       "  let h = k >> 1u;  // 2^k in two factors: each a normal float\n"
       "  return exp(r) * sg_exp2i(h) * sg_exp2i(k - h);\n"
       "}\n"},
      {"sg_log", 1,
       "// 2 atanh(s) = log((1 + s) / (1 - s)) = 2 s P(s^2) by its series, |s| <= 0.15: this is P(z)\n"
       "float sg_atanh_poly(float z) {\n"
       "  return 1.0 + z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 + z * 0.0909090936))));\n}\n"
       "float sg_log(float x) {  // log near 1 by the series of s = (x - 1) / (x + 1) (x - 1 is exact there); C99's values at 0, < 0, inf\n"
       "  if (x > 0.8 && x < 1.25) {\n"
       "    float s = (x - 1.0) / (x + 1.0);\n"
       "    return 2.0 * s * sg_atanh_poly(s * s);\n"
       "  }\n"
       "  if (x > 0.0) return sg_isinf(x) ? x : log(x);\n"
       "  return x == 0.0 ? uintBitsToFloat(0xff800000u) : uintBitsToFloat(0x7fc00000u);\n}\n",
       // WGSL
       "// 2 atanh(s) = log((1 + s) / (1 - s)) = 2 s P(s^2) by its series, |s| <= 0.15: this is P(z)\n"
       "fn sg_atanh_poly(z: f32) -> f32 {\n"
       "  return 1.0 + z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 + z * 0.0909090936))));\n"
       "}\n"
       "fn sg_log(x: f32) -> f32 {  // log near 1 by the series of s = (x - 1) / (x + 1) (x - 1 is exact there); C99's values at 0, < 0, inf\n"
       "  if (x > 0.8 && x < 1.25) {\n"
       "    let s = (x - 1.0) / (x + 1.0);\n"
       "    return 2.0 * s * sg_atanh_poly(s * s);\n"
       "  }\n"
       "  if (x > 0.0) { return select(log(x), x, sg_isinf(x)); }\n"
       "  return select(sg_f32_bits(0x7fc00000u), sg_f32_bits(0xff800000u), x == 0.0);\n"
       "}\n"},
      {"sg_log1p", 1,
       "float sg_log1p(float x) {  // log(1 + x): 2 atanh(s), s = x / (2 + x), by its series for |x| < 0.25\n"
       "  if (!(abs(x) < 0.25)) return sg_log(1.0 + x);\n"
       "  float w = 2.0 / (2.0 + x), s = 0.5 * x * w;  // 2 s = x w: no underflow of s for tiny x\n"
       "  return x * w * sg_atanh_poly(s * s);\n}\n",
       // WGSL
       "fn sg_log1p(x: f32) -> f32 {  // log(1 + x): 2 atanh(s), s = x / (2 + x), by its series for |x| < 0.25\n"
       "  if (!(abs(x) < 0.25)) { return sg_log(1.0 + x); }\n"
       "  let w = 2.0 / (2.0 + x);\n"
       "  let s = 0.5 * x * w;  // 2 s = x w: no underflow of s for tiny x\n"
       "  return x * w * sg_atanh_poly(s * s);\n"
       "}\n"},
      {"sg_sqrt", 1,
       "float sg_sqrt(float x) { return x < 0.0 ? uintBitsToFloat(0x7fc00000u) : sqrt(x); }  // GLSL: undefined for x < 0\n",
       // WGSL
       "fn sg_sqrt(x: f32) -> f32 { return select(sqrt(x), sg_f32_bits(0x7fc00000u), x < 0.0); }  // WGSL: indeterminate for x < 0\n"},
      {"sg_rsqrt", 1,
       "float sg_rsqrt(float x) {  // 1/sqrt(x); GLSL's inversesqrt is undefined for x <= 0\n"
       "  if (x > 0.0) return inversesqrt(x);\n"
       "  if (x == 0.0) return sg_signbit(x) ? uintBitsToFloat(0xff800000u) : uintBitsToFloat(0x7f800000u);\n"
       "  return uintBitsToFloat(0x7fc00000u);\n}\n",
       // WGSL
       "fn sg_rsqrt(x: f32) -> f32 {  // 1/sqrt(x); WGSL's inverseSqrt is indeterminate for x <= 0\n"
       "  if (x > 0.0) { return inverseSqrt(x); }\n"
       "  if (x == 0.0) { return select(sg_f32_bits(0x7f800000u), sg_f32_bits(0xff800000u), sg_signbit(x)); }\n"
       "  return sg_f32_bits(0x7fc00000u);\n"
       "}\n"},
      {"sg_pow", 2,
       "// pow of a finite m > 0 and a finite b as exp(b log m) with log m and the product b log m in two floats\n"
       "// (hi + lo): GLSL's pow, exp2(b log2 m), loses the low bits of log2 m near 1, which |b| = 1e4 amplifies\n"
       "float sg_split_hi(float x) { return uintBitsToFloat(floatBitsToUint(x) & 0xfffff000u); }  // the top 12 bits\n"
       "vec2 sg_two_prod(float a, float b) {  // (p, e) with p + e = a b (Dekker: exact partial products, FMA-proof)\n"
       "  float p = a * b, ah = sg_split_hi(a), al = a - ah, bh = sg_split_hi(b), bl = b - bh;\n"
       "  return vec2(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);\n}\n"
       "vec2 sg_log_hilo(float m) {  // log m = e ln 2 + 2 atanh(s), s = (f - 1) / (f + 1), f in [0.707, 1.414]: as hi + lo\n"
       "  uint u = floatBitsToUint(m);\n"
       "  int e = 0;\n"
       "  if (u < 0x00800000u) { u = floatBitsToUint(m * 16777216.0); e = -24; }  // subnormal m\n"
       "  e += int(u >> 23) - 127;\n"
       "  float f = uintBitsToFloat((u & 0x007fffffu) | 0x3f800000u);\n"
       "  if (f > 1.41421354) { f *= 0.5; e += 1; }\n"
       "  float g = f - 1.0, d = 2.0 + g, dl = g - (d - 2.0);  // g exact; d + dl = 2 + g exactly\n"
       "  float s = g / d;\n"
       "  vec2 sd = sg_two_prod(s, d);\n"
       "  float sl = (((g - sd.x) - sd.y) - s * dl) / d;  // s + sl = g / (2 + g)\n"
       "  float z = s * s;\n"
       "  float tail = 2.0 * s * z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 +\n"
       "               z * (0.0909090936 + z * 0.0769230798)))));\n"
       "  float eh = float(e) * 0.693145752, hi = eh + 2.0 * s;  // e * ln2's first part is exact (|e| < 2^8)\n"
       "  float bv = hi - eh, err = (eh - (hi - bv)) + (2.0 * s - bv);  // two-sum\n"
       "  float lo = err + 2.0 * sl + tail + float(e) * 1.42860677e-6;\n"
       "  float h = hi + lo;\n"
       "  return vec2(h, lo - (h - hi));\n}\n"
       "float sg_pow_finite(float m, float b) {\n"
       "  vec2 l = sg_log_hilo(m);\n"
       "  vec2 t = sg_two_prod(b, l.x);\n"
       "  if (t.x > 89.0) return uintBitsToFloat(0x7f800000u);\n"
       "  if (t.x < -104.0) return 0.0;\n"
       "  float tl = t.y + b * l.y;\n"
       "  float n = roundEven(t.x * 1.44269502);  // exp(t.x + tl) = 2^n exp(r), ln 2 in two parts as in sg_exp\n"
       "  float r = ((t.x - n * 0.693145752) - n * 1.42860677e-6) + tl;\n"
       "  int k = int(n), kh = k >> 1;\n"
       "  return exp(r) * sg_exp2i(kh) * sg_exp2i(k - kh);\n}\n"
       "float sg_pow(float a, float b) {  // torch.pow (C99's pow: every special case); GLSL's pow is undefined for a <= 0\n"
       "  if (b == 0.0 || a == 1.0) return 1.0;  // also for a NaN other operand\n"
       "  if (sg_isnan(a) || sg_isnan(b)) return uintBitsToFloat(0x7fc00000u);\n"
       "  float m = abs(a);\n"
       "  bool b_int = !sg_isinf(b) && floor(b) == b;\n"
       "  bool b_odd = b_int && abs(b) < 16777216.0 && mod(b, 2.0) == 1.0;\n"
       "  float r;\n"
       "  if (sg_isinf(b)) r = m == 1.0 ? 1.0 : ((m < 1.0) == (b < 0.0) ? uintBitsToFloat(0x7f800000u) : 0.0);\n"
       "  else if (m == 0.0) r = b < 0.0 ? uintBitsToFloat(0x7f800000u) : 0.0;\n"
       "  else if (sg_isinf(m)) r = b < 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);\n"
       "  else r = sg_pow_finite(m, b);\n"
       "  if (!sg_signbit(a) || sg_isinf(b)) return r;\n"
       "  if (m != 0.0 && !sg_isinf(m) && !b_int) return uintBitsToFloat(0x7fc00000u);  // a negative base, b not an integer\n"
       "  return b_odd ? -r : r;\n}\n",
       // WGSL
       "// pow of a finite m > 0 and a finite b as exp(b log m) with log m and the product b log m in two floats\n"
       "// (hi + lo): WGSL's pow, exp2(b log2 m), loses the low bits of log2 m near 1, which |b| = 1e4 amplifies\n"
       "fn sg_split_hi(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) & 0xfffff000u); }  // the top 12 bits\n"
       "fn sg_two_prod(a: f32, b: f32) -> vec2<f32> {  // (p, e) with p + e = a b (Dekker: exact partial products, FMA-proof)\n"
       "  let p = a * b;\n"
       "  let ah = sg_split_hi(a);\n"
       "  let al = a - ah;\n"
       "  let bh = sg_split_hi(b);\n"
       "  let bl = b - bh;\n"
       "  return vec2<f32>(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);\n"
       "}\n"
       "fn sg_log_hilo(m: f32) -> vec2<f32> {  // log m = e ln 2 + 2 atanh(s), s = (f - 1) / (f + 1), f in [0.707, 1.414]: as hi + lo\n"
       "  var u = bitcast<u32>(m);\n"
       "  var e = 0;\n"
       "  if (u < 0x00800000u) { u = bitcast<u32>(m * 16777216.0); e = -24; }  // subnormal m\n"
       "  e += i32(u >> 23u) - 127;\n"
       "  var f = bitcast<f32>((u & 0x007fffffu) | 0x3f800000u);\n"
       "  if (f > 1.41421354) { f *= 0.5; e += 1; }\n"
       "  let g = f - 1.0;\n"
       "  let d = 2.0 + g;\n"
       "  let dl = g - (d - 2.0);  // g exact; d + dl = 2 + g exactly\n"
       "  let s = g / d;\n"
       "  let sd = sg_two_prod(s, d);\n"
       "  let sl = (((g - sd.x) - sd.y) - s * dl) / d;  // s + sl = g / (2 + g)\n"
       "  let z = s * s;\n"
       "  let tail = 2.0 * s * z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 +\n"
       "             z * (0.0909090936 + z * 0.0769230798)))));\n"
       "  let eh = f32(e) * 0.693145752;  // e * ln2's first part is exact (|e| < 2^8)\n"
       "  let hi = eh + 2.0 * s;\n"
       "  let bv = hi - eh;\n"
       "  let err = (eh - (hi - bv)) + (2.0 * s - bv);  // two-sum\n"
       "  let lo = err + 2.0 * sl + tail + f32(e) * 1.42860677e-6;\n"
       "  let h = hi + lo;\n"
       "  return vec2<f32>(h, lo - (h - hi));\n"
       "}\n"
       "fn sg_pow_finite(m: f32, b: f32) -> f32 {\n"
       "  let l = sg_log_hilo(m);\n"
       "  let t = sg_two_prod(b, l.x);\n"
       "  if (t.x > 89.0) { return sg_f32_bits(0x7f800000u); }\n"
       "  if (t.x < -104.0) { return 0.0; }\n"
       "  let tl = t.y + b * l.y;\n"
       "  let n = round(t.x * 1.44269502);  // exp(t.x + tl) = 2^n exp(r), ln 2 in two parts as in sg_exp\n"
       "  let r = ((t.x - n * 0.693145752) - n * 1.42860677e-6) + tl;\n"
       "  let k = i32(n);\n"
       "  let kh = k >> 1u;\n"
       "  return exp(r) * sg_exp2i(kh) * sg_exp2i(k - kh);\n"
       "}\n"
       "fn sg_pow(a: f32, b: f32) -> f32 {  // torch.pow (C99's pow: every special case); WGSL's pow is indeterminate for a <= 0\n"
       "  if (b == 0.0 || a == 1.0) { return 1.0; }  // also for a NaN other operand\n"
       "  if (sg_isnan(a) || sg_isnan(b)) { return sg_f32_bits(0x7fc00000u); }\n"
       "  let m = abs(a);\n"
       "  let b_int = !sg_isinf(b) && floor(b) == b;\n"
       "  let b_odd = b_int && abs(b) < 16777216.0 && b - 2.0 * floor(b * 0.5) == 1.0;\n"
       "  var r: f32;\n"
       "  if (sg_isinf(b)) { r = select(select(0.0, sg_f32_bits(0x7f800000u), (m < 1.0) == (b < 0.0)), 1.0, m == 1.0); }\n"
       "  else if (m == 0.0) { r = select(0.0, sg_f32_bits(0x7f800000u), b < 0.0); }\n"
       "  else if (sg_isinf(m)) { r = select(sg_f32_bits(0x7f800000u), 0.0, b < 0.0); }\n"
       "  else { r = sg_pow_finite(m, b); }\n"
       "  if (!sg_signbit(a) || sg_isinf(b)) { return r; }\n"
       "  if (m != 0.0 && !sg_isinf(m) && !b_int) { return sg_f32_bits(0x7fc00000u); }  // a negative base, b not an integer\n"
       "  return select(r, -r, b_odd);\n"
       "}\n"},
      {"sg_sin,sg_cos", 1,
       "// sin and cos: x = k pi/2 + r, |r| <= pi/4 (pi/2 in 4 parts, k * part exact for |k| < 2^16), then the Taylor\n"
       "// polynomials of sin/cos on r by k's quadrant; past |x| 1e5 the driver's sin/cos\n"
       "float sg_sin_poly(float r) {\n"
       "  float z = r * r;\n"
       "  return r + r * z * (-0.166666672 + z * (0.00833333377 + z * (-0.000198412701 + z * (2.75573188e-06 + z * -2.50521079e-08))));\n}\n"
       "float sg_cos_poly(float r) {\n"
       "  float z = r * r;\n"
       "  return 1.0 + z * (-0.5 + z * (0.0416666679 + z * (-0.00138888892 + z * (2.48015876e-05 + z * (-2.755732e-07 + z * 2.08767559e-09)))));\n}\n"
       "float sg_sincos(float x, int quarter_turns) {  // sin(x + quarter_turns * pi/2)\n"
       "  if (!(abs(x) < 1e5)) {\n"
       "    if (sg_isnan(x) || sg_isinf(x)) return uintBitsToFloat(0x7fc00000u);\n"
       "    return quarter_turns == 0 ? sin(x) : cos(x);\n"
       "  }\n"
       "  float k = roundEven(x * 0.636619747);\n"
       "  float r = (((x - k * 1.5703125) - k * 4.84466553e-4) + k * 6.40749931e-7) - k * 9.92093518e-10;\n"
       "  int q = (int(k) + quarter_turns) & 3;\n"
       "  float s = (q & 1) == 0 ? sg_sin_poly(r) : sg_cos_poly(r);\n"
       "  return (q & 2) == 0 ? s : -s;\n}\n"
       "float sg_sin(float x) { return sg_sincos(x, 0); }\n"
       "float sg_cos(float x) { return sg_sincos(x, 1); }\n",
       // WGSL
       "// sin and cos: x = k pi/2 + r, |r| <= pi/4 (pi/2 in 4 parts, k * part exact for |k| < 2^16), then the Taylor\n"
       "// polynomials of sin/cos on r by k's quadrant; past |x| 1e5 the driver's sin/cos\n"
       "fn sg_sin_poly(r: f32) -> f32 {\n"
       "  let z = r * r;\n"
       "  return r + r * z * (-0.166666672 + z * (0.00833333377 + z * (-0.000198412701 + z * (2.75573188e-06 + z * -2.50521079e-08))));\n"
       "}\n"
       "fn sg_cos_poly(r: f32) -> f32 {\n"
       "  let z = r * r;\n"
       "  return 1.0 + z * (-0.5 + z * (0.0416666679 + z * (-0.00138888892 + z * (2.48015876e-05 + z * (-2.755732e-07 + z * 2.08767559e-09)))));\n"
       "}\n"
       "fn sg_sincos(x: f32, quarter_turns: i32) -> f32 {  // sin(x + quarter_turns * pi/2)\n"
       "  if (!(abs(x) < 1e5)) {\n"
       "    if (sg_isnan(x) || sg_isinf(x)) { return sg_f32_bits(0x7fc00000u); }\n"
       "    return select(cos(x), sin(x), quarter_turns == 0);\n"
       "  }\n"
       "  let k = round(x * 0.636619747);\n"
       "  let r = (((x - k * 1.5703125) - k * 4.84466553e-4) + k * 6.40749931e-7) - k * 9.92093518e-10;\n"
       "  let q = (i32(k) + quarter_turns) & 3;\n"
       "  let s = select(sg_cos_poly(r), sg_sin_poly(r), (q & 1) == 0);\n"
       "  return select(-s, s, (q & 2) == 0);\n"
       "}\n"
       "fn sg_sin(x: f32) -> f32 { return sg_sincos(x, 0); }\n"
       "fn sg_cos(x: f32) -> f32 { return sg_sincos(x, 1); }\n"},
      {"sg_tanh", 1,
       "float sg_tanh(float x) {  // Taylor series for |x| < 0.55; else 1 - 2 / (exp(2|x|) + 1), signed (1 where exp overflows)\n"
       "  float a = abs(x);\n"
       "  if (a < 0.55) {\n"
       "    float z = x * x;\n"
       "    return x + x * z * (-0.333333343 + z * (0.13333334 + z * (-0.0539682545 + z * (0.0218694881 + z * (-0.00886323582 +\n"
       "           z * (0.00359212793 + z * (-0.00145583437 + z * (0.000590027426 + z * -0.00023912912))))))));\n"
       "  }\n"
       "  if (sg_isnan(x)) return x;\n"
       "  float t = 1.0 - 2.0 / (sg_exp(2.0 * a) + 1.0);\n"
       "  return x < 0.0 ? -t : t;\n}\n",
       // WGSL
       "fn sg_tanh(x: f32) -> f32 {  // Taylor series for |x| < 0.55; else 1 - 2 / (exp(2|x|) + 1), signed (1 where exp overflows)\n"
       "  let a = abs(x);\n"
       "  if (a < 0.55) {\n"
       "    let z = x * x;\n"
       "    return x + x * z * (-0.333333343 + z * (0.13333334 + z * (-0.0539682545 + z * (0.0218694881 + z * (-0.00886323582 +\n"
       "           z * (0.00359212793 + z * (-0.00145583437 + z * (0.000590027426 + z * -0.00023912912))))))));\n"
       "  }\n"
       "  if (sg_isnan(x)) { return x; }\n"
       "  let t = 1.0 - 2.0 / (sg_exp(2.0 * a) + 1.0);\n"
       "  return select(t, -t, x < 0.0);\n"
       "}\n"},
      {"sg_sigmoid", 1,
       "float sg_sigmoid(float x) {  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow, small values keep precision\n"
       "  float e = sg_exp(-abs(x));\n"
       "  float s = 1.0 / (1.0 + e);\n"
       "  return x >= 0.0 ? s : e * s;\n}\n",
       // WGSL
       "fn sg_sigmoid(x: f32) -> f32 {  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow, small values keep precision\n"
       "  let e = sg_exp(-abs(x));\n"
       "  let s = 1.0 / (1.0 + e);\n"
       "  return select(e * s, s, x >= 0.0);\n"
       "}\n"},
  };
  static_assert(sizeof(defs) / sizeof(defs[0]) == static_cast<size_t>(MathHelper::kCount));
  return defs[static_cast<size_t>(h)];
}

/// The helpers `h` calls (besides itself).
MathHelpers dependencies(MathHelper h) {
  MathHelpers d;
  switch (h) {
    case MathHelper::IsNan: break;
    case MathHelper::ArgBetter:
      d.use(MathHelper::IsNan);
      if (argmax_form() == ArgmaxForm::MaxBits) d.use(MathHelper::Max);
      break;
    case MathHelper::Log1p: d.use(MathHelper::Log); [[fallthrough]];
    case MathHelper::Log: d.use(MathHelper::IsNan); break;
    case MathHelper::Tanh:
    case MathHelper::Pow:  // sg_exp2i
    case MathHelper::Sigmoid: d.use(MathHelper::Exp); [[fallthrough]];
    default: d.use(MathHelper::IsNan); break;
  }
  return d;
}

std::string vec4_overloads(const HelperDef& d) {
  std::string out, names = d.names;
  size_t pos = 0;
  while (d.arity > 0 && pos < names.size()) {
    size_t end = names.find(',', pos);
    if (end == std::string::npos) end = names.size();
    const std::string f = names.substr(pos, end - pos);
    if (d.arity == 1)
      out += fmt::format("vec4 {0}(vec4 x) {{ return vec4({0}(x.x), {0}(x.y), {0}(x.z), {0}(x.w)); }}\n", f);
    else
      out += fmt::format("vec4 {0}(vec4 a, vec4 b) {{ return vec4({0}(a.x, b.x), {0}(a.y, b.y), {0}(a.z, b.z), {0}(a.w, b.w)); }}\n", f);
    pos = end + 1;
  }
  return out;
}

/// +1 / -1 when `s` is the literal +0.0 / -0.0 (as both printers write zero constants), else 0.
int zero_literal(const std::string& s) { return s == "0.0" ? 1 : s == "-0.0" ? -1 : 0; }

}  // namespace

MathHelpers MathHelpers::closure() const {
  MathHelpers all = *this;
  for (int pass = 0; pass < 3; ++pass)  // dependencies are at most 3 deep (tanh -> exp -> isnan)
    for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i)
      if (all.uses(static_cast<MathHelper>(i))) all |= dependencies(static_cast<MathHelper>(i));
  return all;
}

std::string MathHelpers::source(bool vec4) const {
  const MathHelpers all = closure();
  std::string src;
  for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i) {
    if (!all.uses(static_cast<MathHelper>(i))) continue;
    const HelperDef& d = helper_def(static_cast<MathHelper>(i));
    if (static_cast<MathHelper>(i) == MathHelper::ArgBetter) {
      src += argmax_helper_source(argmax_form(), false);  // its vec4 overload included
      continue;
    }
    src += d.source;
    if (vec4) src += vec4_overloads(d);
  }
  return src;
}

std::string MathHelpers::wgsl_source() const {
  const MathHelpers all = closure();
  std::string src;
  for (unsigned i = 0; i < static_cast<unsigned>(MathHelper::kCount); ++i)
    if (all.uses(static_cast<MathHelper>(i)))
      src += static_cast<MathHelper>(i) == MathHelper::ArgBetter ? argmax_helper_source(argmax_form(), true)
                                                                 : std::string(helper_def(static_cast<MathHelper>(i)).wgsl);
  return src;
}

std::string math_helper_source(MathHelper h, bool wgsl) {
  if (h == MathHelper::ArgBetter) return argmax_helper_source(argmax_form(), wgsl);
  const HelperDef& d = helper_def(h);
  return wgsl ? d.wgsl : d.source;
}


std::string float_math(bool wgsl, SOp op, const std::string& a, const std::string& b, const std::string& c,
                       MathHelpers& used) {
  auto call = [&](MathHelper h, const char* fn, int arity) {
    used.use(h);
    return arity == 1 ? fmt::format("{}({})", fn, a) : fmt::format("{}({}, {})", fn, a, b);
  };
  auto zero_call = [&](const char* fn, const std::string& x) {
    used.use(MathHelper::ZeroArith);
    return fmt::format("{}({})", fn, x);
  };
  if (op == SOp::Mul && (zero_literal(a) || zero_literal(b))) {
    const bool lit_a = zero_literal(a) != 0;
    return zero_call((lit_a ? zero_literal(a) : zero_literal(b)) > 0 ? "sg_times_zero" : "sg_times_negzero", lit_a ? b : a);
  }
  if (op == SOp::Div && zero_literal(b)) return zero_call(zero_literal(b) > 0 ? "sg_over_zero" : "sg_over_negzero", a);
  if (op == SOp::Div && zero_literal(a)) return zero_call(zero_literal(a) > 0 ? "sg_zero_over" : "sg_negzero_over", b);
  switch (op) {
    case SOp::Neg: return fmt::format("(-{})", a);
    case SOp::Abs: return fmt::format("abs({})", a);
    case SOp::Exp: return call(MathHelper::Exp, "sg_exp", 1);
    case SOp::Log: return call(MathHelper::Log, "sg_log", 1);
    case SOp::Log1p: return call(MathHelper::Log1p, "sg_log1p", 1);
    case SOp::Sqrt: return call(MathHelper::Sqrt, "sg_sqrt", 1);
    case SOp::Rsqrt: return call(MathHelper::Rsqrt, "sg_rsqrt", 1);
    case SOp::Sin: return call(MathHelper::SinCos, "sg_sin", 1);
    case SOp::Cos: return call(MathHelper::SinCos, "sg_cos", 1);
    case SOp::Tanh: return call(MathHelper::Tanh, "sg_tanh", 1);
    case SOp::Sigmoid: return call(MathHelper::Sigmoid, "sg_sigmoid", 1);
    case SOp::Relu: return call(MathHelper::Relu, "sg_relu", 1);
    case SOp::Sign: return call(MathHelper::Relu, "sg_sign", 1);
    case SOp::Floor: return fmt::format("floor({})", a);
    case SOp::Round: return fmt::format(fmt::runtime(wgsl ? "round({})" : "roundEven({})"), a);  // both: halfway cases to even
    case SOp::Recip: return fmt::format("(1.0 / {})", a);
    case SOp::Add: return fmt::format("({} + {})", a, b);
    case SOp::Sub: return fmt::format("({} - {})", a, b);
    case SOp::Mul: return fmt::format("({} * {})", a, b);
    case SOp::Div: return fmt::format("({} / {})", a, b);
    case SOp::Pow: return call(MathHelper::Pow, "sg_pow", 2);
    case SOp::Max: return call(MathHelper::Max, "sg_max", 2);
    case SOp::Min: return call(MathHelper::Min, "sg_min", 2);
    case SOp::Lt: return fmt::format(fmt::runtime(wgsl ? "f32({} < {})" : "float({} < {})"), a, b);
    case SOp::Le: return fmt::format(fmt::runtime(wgsl ? "f32({} <= {})" : "float({} <= {})"), a, b);
    case SOp::Gt: return fmt::format(fmt::runtime(wgsl ? "f32({} > {})" : "float({} > {})"), a, b);
    case SOp::Ge: return fmt::format(fmt::runtime(wgsl ? "f32({} >= {})" : "float({} >= {})"), a, b);
    case SOp::Eq: return fmt::format(fmt::runtime(wgsl ? "f32({} == {})" : "float({} == {})"), a, b);
    case SOp::Ne: return fmt::format(fmt::runtime(wgsl ? "f32({} != {})" : "float({} != {})"), a, b);
    case SOp::Select:
      return wgsl ? fmt::format("select({}, {}, {} != 0.0)", c, b, a) : fmt::format("({} != 0.0 ? {} : {})", a, b, c);
    case SOp::Const:
    case SOp::Arg: break;
  }
  return wgsl ? "sg_f32_bits(0x7fc00000u)" : kNaN;
}

std::string glsl_math(SOp op, const std::string& a, const std::string& b, const std::string& c, MathHelpers& used) {
  return float_math(false, op, a, b, c, used);
}

std::string reduce_step(bool wgsl, bool max, const std::string& acc, const std::string& x, MathHelpers& used) {
  return float_math(wgsl, max ? SOp::Max : SOp::Min, acc, x, "", used);
}

std::string glsl_reduce_step(bool max, const std::string& acc, const std::string& x, MathHelpers& used) {
  return reduce_step(false, max, acc, x, used);
}

std::string glsl_argmax_better(const std::string& x, const std::string& best, MathHelpers& used) {
  used.use(MathHelper::ArgBetter);
  return fmt::format("sg_argmax_better({}, {})", x, best);
}

}  // namespace sg
