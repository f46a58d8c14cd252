// erf and erfc with C99's (torch's) values: erf(+-inf) = +-1, erf(-0) = -0, erfc(-inf) = 2, erfc(inf) = 0, NaN
// propagates. Minimax polynomials on the ranges of W. J. Cody, "Rational Chebyshev approximations for the error
// function", Math. Comp. 23 (1969): an odd polynomial below 0.875, exp(-x^2) times a slowly varying factor beyond
// (coefficients and the error over every f32 argument: scripts/fit_erf.py; erf 1.3 ulp, erfc 3.6 ulp, plus the driver's exp)
// P(s) - 1, s = x^2: erf(x) = x + x P(s) for |x| < 0.875
float sg_erf_p(float s) {
  return 0.12837915 + s * (-0.3761255 + s * (0.11282455 + s * (-0.026791463 + s * (0.0050321813 + s * -0.0006203255))));
}
// erfc(a) for 0.875 <= a (not NaN): exp(-a^2) F(a); -a^2 = -h^2 + (h - a)(h + a) with h = a rounded to 12 bits (h^2
// exact: the rounding of a^2 is not amplified), exp(-a^2) = 2^n exp(r) with n = round(-h^2 / ln 2) and r = -h^2 - n ln 2
// (two parts, as sg_exp) + (h - a)(h + a), |r| < 0.55: one exp; F(a) = H(a - 1.4375) below 2, G(1/a^2) / a from 2
float sg_erfc_tail(float a) {
  if (a >= 10.06) return 0.0;  // erfc rounds to 0 (also a = inf)
  float h = uintBitsToFloat(floatBitsToUint(a) & 0xfffff000u);
  float s = -(h * h);
  float n = roundEven(s * 1.44269502);
  float r = ((s - n * 0.693145752) - n * 1.42860677e-6) + (h - a) * (h + a);
  int k = int(n), m = k >> 1;  // 2^k in two factors: each a normal float
  float e = exp(r) * sg_exp2i(m) * sg_exp2i(k - m);
  if (a < 2.0) {
    float t = a - 1.4375;
    return e * (0.33211756 + t * (-0.17354114 + t * (0.08265214 + t * (-0.036487218 + t * (0.0151019255 +
           t * (-0.0058949543 + t * (0.0021986668 + t * (-0.0008504009 + t * 0.00028633178))))))));
  }
  float w = 1.0 / (a * a);
  return e * (0.56418943 + w * (-0.2820678 + w * (0.42150965 + w * (-1.0093236 + w * (2.8655946 + w * (-7.2142262 +
         w * (12.243326 + w * -9.707271))))))) / a;
}
float sg_erf(float x) {
  float a = abs(x);
  if (a < 0.875) return x + x * sg_erf_p(x * x);
  if (sg_isnan(x)) return x;
  float t = a < 3.925 ? 1.0 - sg_erfc_tail(a) : 1.0;  // erfc(3.925) is below half an ulp of 1
  return x < 0.0 ? -t : t;
}
float sg_erfc(float x) {
  float a = abs(x);
  if (a < 0.875) return (1.0 - x) - x * sg_erf_p(x * x);  // 1 - x is exact for x in [0.5, 2]
  if (sg_isnan(x)) return x;
  float t = sg_erfc_tail(a);
  return x < 0.0 ? 2.0 - t : t;
}
