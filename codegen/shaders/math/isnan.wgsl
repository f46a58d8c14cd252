// NaN by its bits: x != x may be folded to false (WGSL lets implementations assume no NaNs)
fn sg_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn sg_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn sg_signbit(x: f32) -> bool { return bitcast<u32>(x) >= 0x80000000u; }
