float sg_tanh(float x) {  // Taylor series for |x| < 0.55; else 1 - 2 / (exp(2|x|) + 1), signed (1 where exp overflows)
  float a = abs(x);
  if (a < 0.55) {
    float z = x * x;
    return x + x * z * (-0.333333343 + z * (0.13333334 + z * (-0.0539682545 + z * (0.0218694881 + z * (-0.00886323582 +
           z * (0.00359212793 + z * (-0.00145583437 + z * (0.000590027426 + z * -0.00023912912))))))));
  }
  if (sg_isnan(x)) return x;
  float t = 1.0 - 2.0 / (sg_exp(2.0 * a) + 1.0);
  return x < 0.0 ? -t : t;
}
