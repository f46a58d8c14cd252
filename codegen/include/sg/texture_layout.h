// shadergrad — how a tensor is stored in an RGBA32F texture (fragment-shader targets).
//
// Pure integer math, no GL: the code generator uses it to emit texelFetch address arithmetic and the GLES
// runtime uses it to size textures and to pack/unpack host data, so both sides agree by construction.
//
// Naming follows TF.js (tfjs-backend-webgl/src/webgl_util.ts): the *logical* shape is the tensor's own shape,
// flattened row-major to `numel` elements; the *physical* shape is the 2-D texture that holds it.
//
//   element e  ->  texel t = e / 4, component c = e % 4 (R,G,B,A)
//   texel t    ->  x = t % width, y = t / width               (rows wrap at `width`)
//
// The texture has width * height >= texels texels; elements past `numel` (the tail of the last texel and
// any whole padding texels) hold 0 after an upload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sg {

/// Logical-to-physical mapping of a row-major tensor onto an RGBA32F 2-D texture, 4 elements per texel.
struct TextureLayout {
  int64_t numel = 0;   ///< logical elements (row-major flattening of the tensor)
  int64_t texels = 0;  ///< ceil(numel / 4): texels that hold data (0 for an empty tensor)
  int64_t width = 1;   ///< physical texture width in texels: min(texels, max_width), at least 1
  int64_t height = 1;  ///< physical texture height in texels: ceil(texels / width), at least 1

  /// Elements per texel (RGBA).
  static constexpr int64_t kComponents = 4;

  /// The layout of a tensor of `numel` elements in textures at most `max_width` texels wide and at most
  /// `max_height` texels high (0 = max_width: GL limits both dimensions by the same MAX_TEXTURE_SIZE; a
  /// caller that narrows the width to force row wrapping passes the real limit as max_height).
  /// numel == 0 gives a 1x1 texture with texels == 0.
  /// Throws sg::ValueError if numel < 0, max_width < 1, max_height < 0, or the tensor needs more than
  /// max_height rows (the message gives numel, the limit, and the largest numel that fits:
  /// 4 * max_width * max_height).
  static TextureLayout for_numel(int64_t numel, int64_t max_width, int64_t max_height = 0);

  /// The layout the scheduler and the GLES backend use for a tensor of `shape`: when the last axis is a
  /// multiple of 4 and the tensor has 2 or more axes, every texture row holds whole rows of the tensor (width =
  /// k * last/4 texels, k >= 1 rows per texture row, k chosen so the width is at least 64 texels where the
  /// tensor has enough rows), so the same column of consecutive tensor rows sits in vertically adjacent texels:
  /// texture caches fetch 2-D tiles, and a matmul reading 4 rows of W at once (x.W^T) or one column of B over k
  /// then hits one tile instead of 4 far-apart rows. Tensors without whole-texel rows (last axis not a multiple
  /// of 4, or 1-D) are a near-square block: width the largest power of two w <= 64 with w * w <= texels (e.g.
  /// 128x10: 320 texels -> 16x20; a 8x1x3x3 conv filter: 18 texels -> 4x5), elements row-major, so their draws
  /// shade whole 2x2 quads in several quad rows (CPU rasterisers hand quad rows to their threads: one long
  /// texture row runs on one thread). Falls back to for_numel (rows wrap at max_width) when max_width is 64 or
  /// less, the tensor row is wider than max_width, or the texture would be taller than max_height.
  /// Measured on the H200 (NVIDIA GLES): see docs/perf-log/3.md, 7.md. Throws like for_numel.
  static TextureLayout for_shape(const std::vector<int64_t>& shape, int64_t max_width, int64_t max_height = 0);

  /// Where one element lives: texel column x, texel row y, component c in [0, 4).
  struct Location {
    int64_t x = 0;
    int64_t y = 0;
    int component = 0;
    bool operator==(const Location&) const = default;
  };

  /// Location of element e (0 <= e < width * height * 4; not range-checked, pure arithmetic).
  constexpr Location locate(int64_t e) const {
    const int64_t t = e / kComponents;
    return Location{t % width, t / width, static_cast<int>(e % kComponents)};
  }

  /// Floats in the whole physical texture: width * height * 4 (the size of a full upload/readback buffer).
  constexpr int64_t padded_floats() const { return width * height * kComponents; }

  /// Rows that contain at least one of the first `n` elements (what a partial readback needs); 0 for n == 0.
  constexpr int64_t rows_for(int64_t n) const {
    const int64_t t = (n + kComponents - 1) / kComponents;
    return (t + width - 1) / width;
  }

  /// "numel=4097 texels=1025 16x65" — for logs and error messages.
  std::string str() const;

  bool operator==(const TextureLayout&) const = default;
};

}  // namespace sg
