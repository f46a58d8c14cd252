float sg_max(float a, float b) {  // torch.maximum: NaN if either is NaN (GLSL's max may return the other)
  return sg_isnan(a) || sg_isnan(b) ? uintBitsToFloat(0x7fc00000u) : max(a, b);
}
