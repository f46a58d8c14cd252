static inline float sg_sigmoid(float x) {  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow
  float e = sg_exp(-fabsf(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}
