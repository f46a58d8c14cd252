fn sg_sqrt(x: f32) -> f32 { return select(sqrt(x), sg_f32_bits(0x7fc00000u), x < 0.0); }  // WGSL: indeterminate for x < 0
