// pow of a finite m > 0 and a finite b as exp(b log m) with log m and the product b log m in two floats
// (hi + lo): WGSL's pow, exp2(b log2 m), loses the low bits of log2 m near 1, which |b| = 1e4 amplifies
fn sg_split_hi(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) & 0xfffff000u); }  // the top 12 bits
fn sg_two_prod(a: f32, b: f32) -> vec2<f32> {  // (p, e) with p + e = a b (Dekker: exact partial products, FMA-proof)
  let p = a * b;
  let ah = sg_split_hi(a);
  let al = a - ah;
  let bh = sg_split_hi(b);
  let bl = b - bh;
  return vec2<f32>(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl);
}
fn sg_log_hilo(m: f32) -> vec2<f32> {  // log m = e ln 2 + 2 atanh(s), s = (f - 1) / (f + 1), f in [0.707, 1.414]: as hi + lo
  var u = bitcast<u32>(m);
  var e = 0;
  if (u < 0x00800000u) { u = bitcast<u32>(m * 16777216.0); e = -24; }  // subnormal m
  e += i32(u >> 23u) - 127;
  var f = bitcast<f32>((u & 0x007fffffu) | 0x3f800000u);
  if (f > 1.41421354) { f *= 0.5; e += 1; }
  let g = f - 1.0;
  let d = 2.0 + g;
  let dl = g - (d - 2.0);  // g exact; d + dl = 2 + g exactly
  let s = g / d;
  let sd = sg_two_prod(s, d);
  let sl = (((g - sd.x) - sd.y) - s * dl) / d;  // s + sl = g / (2 + g)
  let z = s * s;
  let tail = 2.0 * s * z * (0.333333343 + z * (0.200000003 + z * (0.142857149 + z * (0.111111112 +
             z * (0.0909090936 + z * 0.0769230798)))));
  let eh = f32(e) * 0.693145752;  // e * ln2's first part is exact (|e| < 2^8)
  let hi = eh + 2.0 * s;
  let bv = hi - eh;
  let err = (eh - (hi - bv)) + (2.0 * s - bv);  // two-sum
  let lo = err + 2.0 * sl + tail + f32(e) * 1.42860677e-6;
  let h = hi + lo;
  return vec2<f32>(h, lo - (h - hi));
}
fn sg_pow_finite(m: f32, b: f32) -> f32 {
  let l = sg_log_hilo(m);
  let t = sg_two_prod(b, l.x);
  if (t.x > 89.0) { return sg_f32_bits(0x7f800000u); }
  if (t.x < -104.0) { return 0.0; }
  let tl = t.y + b * l.y;
  let n = round(t.x * 1.44269502);  // exp(t.x + tl) = 2^n exp(r), ln 2 in two parts as in sg_exp
  let r = ((t.x - n * 0.693145752) - n * 1.42860677e-6) + tl;
  let k = i32(n);
  let kh = k >> 1u;
  return exp(r) * sg_exp2i(kh) * sg_exp2i(k - kh);
}
fn sg_pow(a: f32, b: f32) -> f32 {  // torch.pow (C99's pow: every special case); WGSL's pow is indeterminate for a <= 0
  if (b == 0.0 || a == 1.0) { return 1.0; }  // also for a NaN other operand
  if (sg_isnan(a) || sg_isnan(b)) { return sg_f32_bits(0x7fc00000u); }
  let m = abs(a);
  let b_int = !sg_isinf(b) && floor(b) == b;
  let b_odd = b_int && abs(b) < 16777216.0 && b - 2.0 * floor(b * 0.5) == 1.0;
  var r: f32;
  if (sg_isinf(b)) { r = select(select(0.0, sg_f32_bits(0x7f800000u), (m < 1.0) == (b < 0.0)), 1.0, m == 1.0); }
  else if (m == 0.0) { r = select(0.0, sg_f32_bits(0x7f800000u), b < 0.0); }
  else if (sg_isinf(m)) { r = select(sg_f32_bits(0x7f800000u), 0.0, b < 0.0); }
  else { r = sg_pow_finite(m, b); }
  if (!sg_signbit(a) || sg_isinf(b)) { return r; }
  if (m != 0.0 && !sg_isinf(m) && !b_int) { return sg_f32_bits(0x7fc00000u); }  // a negative base, b not an integer
  return select(r, -r, b_odd);
}
