// shadergrad — the generated "shapes" image task (sg::data::make_shapes): 128x128 gray images of one filled shape
// each (disc, square, triangle, plus), at a random position, size, rotation and brightness over a noisy
// background, deterministic for a seed. The task of the 128x128 five-conv CNN that runs in a browser Worker
// (examples/web/shapes/, issue 17).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include <fmt/format.h>

#include "sg/datasets.h"
#include "sg/error.h"

namespace sg::data {

namespace {

/// Uniform float in [0, 1) from 24 bits of a mt19937 draw (bit-exact everywhere; <random>'s distributions are not).
float unit(std::mt19937& g) { return static_cast<float>(g() >> 8) * (1.0f / 16777216.0f); }

/// Is (x, y), in the shape's own frame (centre 0, radius 1, unrotated), inside shape `k`?
bool inside(int k, float x, float y) {
  switch (k) {
    case 0: return x * x + y * y <= 1.0f;                                     // disc
    case 1: return std::fabs(x) <= 0.75f && std::fabs(y) <= 0.75f;            // square
    case 2: {                                                                 // triangle, apex up
      // vertices (0, -1), (0.87, 0.5), (-0.87, 0.5): inside when on the inner side of the three edges
      const float a = 0.8660254f;
      auto side = [](float px, float py, float ax, float ay, float bx, float by) {
        return (bx - ax) * (py - ay) - (by - ay) * (px - ax);
      };
      const float s1 = side(x, y, 0, -1, a, 0.5f), s2 = side(x, y, a, 0.5f, -a, 0.5f), s3 = side(x, y, -a, 0.5f, 0, -1);
      return (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0);
    }
    default: return (std::fabs(x) <= 0.28f && std::fabs(y) <= 1.0f) ||      // plus
                    (std::fabs(y) <= 0.28f && std::fabs(x) <= 1.0f);
  }
}

void draw_shape(int k, float cx, float cy, float radius, float angle, float fg, float bg, float noise_amp,
                std::mt19937& g, float* out, int64_t h, int64_t w) {
  const float c = std::cos(angle), s = std::sin(angle);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      // pixel centre in the shape's frame
      const float dx = (static_cast<float>(x) + 0.5f - cx) / radius, dy = (static_cast<float>(y) + 0.5f - cy) / radius;
      const float u = c * dx + s * dy, v = -s * dx + c * dy;
      const float n = (unit(g) - 0.5f) * noise_amp;
      out[y * w + x] = std::clamp((inside(k, u, v) ? fg : bg) + n, 0.0f, 1.0f);
    }
}

}  // namespace

Dataset make_shapes(int64_t n, uint64_t seed, int64_t side) {
  if (n < 1 || side < 16)
    throw ValueError(fmt::format("make_shapes: need n >= 1 and side >= 16 (got n = {}, side = {})", n, side));
  Dataset ds;
  ds.n = n;
  ds.c = 1;
  ds.h = ds.w = side;
  ds.num_classes = kShapeClasses;
  ds.name = "shapes";
  ds.images.resize(static_cast<size_t>(n * side * side));
  ds.labels.resize(static_cast<size_t>(n));
  std::mt19937 g(static_cast<uint32_t>(seed ^ (seed >> 32)) ^ 0x5ea9e5u);
  const float fs = static_cast<float>(side);
  for (int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i % kShapeClasses);  // balanced classes, in a fixed rotation
    const float radius = fs * (0.12f + 0.22f * unit(g));
    const float cx = radius + (fs - 2 * radius) * unit(g), cy = radius + (fs - 2 * radius) * unit(g);
    const float angle = 2.0f * std::numbers::pi_v<float> * unit(g);
    const float bg = 0.1f + 0.3f * unit(g), fg = bg + 0.3f + 0.5f * unit(g) * (1.0f - bg - 0.3f);
    ds.labels[static_cast<size_t>(i)] = k;
    draw_shape(k, cx, cy, radius, angle, fg, bg, 0.2f, g, ds.images.data() + i * side * side, side, side);
  }
  return ds;
}

}  // namespace sg::data
