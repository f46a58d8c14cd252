// shadergrad — TextureLayout (see sg/texture_layout.h).
#include "sg/texture_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

TextureLayout TextureLayout::for_numel(int64_t numel, int64_t max_width, int64_t max_height) {
  if (max_width < 1)
    throw ValueError(fmt::format("TextureLayout: max_width must be >= 1 texel, got {} (pass the device's "
                                 "MAX_TEXTURE_SIZE or a smaller positive limit)",
                                 max_width));
  if (max_height < 0)
    throw ValueError(fmt::format("TextureLayout: max_height must be >= 0 texels (0 = max_width), got {}",
                                 max_height));
  if (max_height == 0) max_height = max_width;
  if (numel < 0)
    throw ValueError(fmt::format("TextureLayout: numel must be >= 0, got {}", numel));

  TextureLayout l;
  l.numel = numel;
  l.texels = numel / kComponents + (numel % kComponents != 0 ? 1 : 0);
  if (l.texels == 0) return l;  // empty tensor: a 1x1 texture keeps every binding valid
  l.width = l.texels < max_width ? l.texels : max_width;
  l.height = l.texels / l.width + (l.texels % l.width != 0 ? 1 : 0);
  if (l.height > max_height) {
    const long double cap = 4.0L * static_cast<long double>(max_width) * static_cast<long double>(max_height);
    throw ValueError(fmt::format(
        "TextureLayout: tensor of {} elements needs a {}x{} texel texture, larger than the {}x{} limit "
        "(at most {:.0f} elements fit in one RGBA32F texture); split the tensor or use a device with a "
        "larger MAX_TEXTURE_SIZE",
        numel, l.width, l.height, max_width, max_height, static_cast<double>(cap)));
  }
  return l;
}

TextureLayout TextureLayout::for_shape(const std::vector<int64_t>& shape, int64_t max_width, int64_t max_height) {
  TextureLayout l = for_numel([&] {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }(), max_width, max_height);
  if (l.texels == 0) return l;
  constexpr int64_t kRowTexels = 64;  // the narrowest texture row for_shape makes when the tensor has enough texels
  if (shape.size() < 2 || shape.back() % kComponents != 0) {
    // no whole-texel tensor rows: a near-square block, the widest power of two not above sqrt(texels) (at most
    // 64), rather than rows of max_width texels, so a small tensor is whole 2x2 quads in several quad rows instead
    // of one long texture row: CPU rasterisers hand quad rows to their threads (SwiftShader: row r of quads to
    // cluster r mod 16), so a draw of one or a few quad rows runs on one or a few threads
    // (for_numel's rows when the caller's width limit is 64 or less: it asked for rows that wrap there)
    int64_t w = 1;
    while (w < kRowTexels && (2 * w) * (2 * w) <= l.texels) w *= 2;
    if (max_width > kRowTexels && w < l.width) {
      const int64_t h = (l.texels + w - 1) / w;
      if (h <= (max_height ? max_height : max_width)) l.width = w, l.height = h;
    }
    return l;
  }
  const int64_t row = shape.back() / kComponents;  // texels per tensor row
  const int64_t rows = l.texels / row;
  if (row > max_width) return l;
  int64_t k = std::max<int64_t>(1, std::min<int64_t>(rows, (kRowTexels + row - 1) / row));  // tensor rows per texture row
  while (k > 1 && row * k > max_width) --k;
  const int64_t width = row * k;
  const int64_t height = (l.texels + width - 1) / width;
  if (height > (max_height ? max_height : max_width)) return l;
  l.width = width;
  l.height = height;
  return l;
}

std::string TextureLayout::str() const {
  return fmt::format("numel={} texels={} {}x{}", numel, texels, width, height);
}

}  // namespace sg
