float sg_log1p(float x) {  // log(1 + x): 2 atanh(s), s = x / (2 + x), by its series for |x| < 0.25
  if (!(abs(x) < 0.25)) return sg_log(1.0 + x);
  float w = 2.0 / (2.0 + x), s = 0.5 * x * w;  // 2 s = x w: no underflow of s for tiny x
  return x * w * sg_atanh_poly(s * s);
}
