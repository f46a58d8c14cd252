static inline float sg_relu(float x) { return sg_isnan(x) ? x : (x < 0.0f ? 0.0f : x); }  // torch.relu(NaN) = NaN
static inline float sg_sign(float x) { return sg_isnan(x) ? x : x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f; }
