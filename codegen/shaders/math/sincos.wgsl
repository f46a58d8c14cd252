// sin and cos: x = k pi/2 + r, |r| <= pi/4 (pi/2 in 4 parts, k * part exact for |k| < 2^16), then the Taylor
// polynomials of sin/cos on r by k's quadrant; past |x| 1e5 the driver's sin/cos
fn sg_sin_poly(r: f32) -> f32 {
  let z = r * r;
  return r + r * z * (-0.166666672 + z * (0.00833333377 + z * (-0.000198412701 + z * (2.75573188e-06 + z * -2.50521079e-08))));
}
fn sg_cos_poly(r: f32) -> f32 {
  let z = r * r;
  return 1.0 + z * (-0.5 + z * (0.0416666679 + z * (-0.00138888892 + z * (2.48015876e-05 + z * (-2.755732e-07 + z * 2.08767559e-09)))));
}
fn sg_sincos(x: f32, quarter_turns: i32) -> f32 {  // sin(x + quarter_turns * pi/2)
  if (!(abs(x) < 1e5)) {
    if (sg_isnan(x) || sg_isinf(x)) { return sg_f32_bits(0x7fc00000u); }
    return select(cos(x), sin(x), quarter_turns == 0);
  }
  let k = round(x * 0.636619747);
  let r = (((x - k * 1.5703125) - k * 4.84466553e-4) + k * 6.40749931e-7) - k * 9.92093518e-10;
  let q = (i32(k) + quarter_turns) & 3;
  let s = select(sg_cos_poly(r), sg_sin_poly(r), (q & 1) == 0);
  return select(-s, s, (q & 2) == 0);
}
fn sg_sin(x: f32) -> f32 { return sg_sincos(x, 0); }
fn sg_cos(x: f32) -> f32 { return sg_sincos(x, 1); }
