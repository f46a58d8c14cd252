float sg_sigmoid(float x) {  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow, small values keep precision
  float e = sg_exp(-abs(x));
  float s = 1.0 / (1.0 + e);
  return x >= 0.0 ? s : e * s;
}
