// NaN by its bits, as in GLSL and WGSL (robust to a no-NaN assumption; the same code in every language)
static inline bool sg_isnan(float x) { return (sg_f32_u(x) & 0x7fffffffu) > 0x7f800000u; }
static inline bool sg_isinf(float x) { return (sg_f32_u(x) & 0x7fffffffu) == 0x7f800000u; }
static inline bool sg_signbit(float x) { return sg_f32_u(x) >= 0x80000000u; }
