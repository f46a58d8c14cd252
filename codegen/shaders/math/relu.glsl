float sg_relu(float x) { return sg_isnan(x) ? x : max(x, 0.0); }  // torch.relu(NaN) = NaN
float sg_sign(float x) { return sg_isnan(x) ? x : sign(x); }
