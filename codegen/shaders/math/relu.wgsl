fn sg_relu(x: f32) -> f32 { return select(max(x, 0.0), x, sg_isnan(x)); }  // torch.relu(NaN) = NaN
fn sg_sign(x: f32) -> f32 { return select(sign(x), x, sg_isnan(x)); }
