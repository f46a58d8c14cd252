float sg_min(float a, float b) {  // torch.minimum: NaN if either is NaN
  return sg_isnan(a) || sg_isnan(b) ? uintBitsToFloat(0x7fc00000u) : min(a, b);
}
