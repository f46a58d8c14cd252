fn sg_sigmoid(x: f32) -> f32 {  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow, small values keep precision
  let e = sg_exp(-abs(x));
  let s = 1.0 / (1.0 + e);
  return select(e * s, s, x >= 0.0);
}
