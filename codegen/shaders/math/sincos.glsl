// sin and cos: x = k pi/2 + r, |r| <= pi/4 (pi/2 in 4 parts, k * part exact for |k| < 2^16), then the Taylor
// polynomials of sin/cos on r by k's quadrant; past |x| 1e5 the driver's sin/cos
float sg_sin_poly(float r) {
  float z = r * r;
  return r + r * z * (-0.166666672 + z * (0.00833333377 + z * (-0.000198412701 + z * (2.75573188e-06 + z * -2.50521079e-08))));
}
float sg_cos_poly(float r) {
  float z = r * r;
  return 1.0 + z * (-0.5 + z * (0.0416666679 + z * (-0.00138888892 + z * (2.48015876e-05 + z * (-2.755732e-07 + z * 2.08767559e-09)))));
}
float sg_sincos(float x, int quarter_turns) {  // sin(x + quarter_turns * pi/2)
  if (!(abs(x) < 1e5)) {
    if (sg_isnan(x) || sg_isinf(x)) return uintBitsToFloat(0x7fc00000u);
    return quarter_turns == 0 ? sin(x) : cos(x);
  }
  float k = roundEven(x * 0.636619747);
  float r = (((x - k * 1.5703125) - k * 4.84466553e-4) + k * 6.40749931e-7) - k * 9.92093518e-10;
  int q = (int(k) + quarter_turns) & 3;
  float s = (q & 1) == 0 ? sg_sin_poly(r) : sg_cos_poly(r);
  return (q & 2) == 0 ? s : -s;
}
float sg_sin(float x) { return sg_sincos(x, 0); }
float sg_cos(float x) { return sg_sincos(x, 1); }
