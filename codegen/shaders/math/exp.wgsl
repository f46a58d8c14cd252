// 2^k as a float from its bits, -126 <= k <= 127
fn sg_exp2i(k: i32) -> f32 { return bitcast<f32>(u32(k + 127) << 23u); }
fn sg_exp(x: f32) -> f32 {  // exp(x) = 2^n exp(r), r = x - n ln 2 in two parts (n * 0.693145752 is exact)
  if (sg_isnan(x)) { return x; }
  if (x > 88.7228394) { return sg_f32_bits(0x7f800000u); }
  if (x < -103.972076) { return 0.0; }
  let n = round(x * 1.44269502);
  let r = (x - n * 0.693145752) - n * 1.42860677e-6;
  let k = i32(n);
  let h = k >> 1u;  // 2^k in two factors: each a normal float
  return exp(r) * sg_exp2i(h) * sg_exp2i(k - h);
}
