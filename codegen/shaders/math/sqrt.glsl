float sg_sqrt(float x) { return x < 0.0 ? uintBitsToFloat(0x7fc00000u) : sqrt(x); }  // GLSL: undefined for x < 0
