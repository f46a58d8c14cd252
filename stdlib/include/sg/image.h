// shadergrad — images: PNG read/write (libpng), PGM/PPM reading, grayscale resize for `shadergrad predict`,
// and tensor rendering with documented colormaps (docs/COLORMAPS.md) for debug dumps and reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include <llvm/ADT/ArrayRef.h>

namespace sg::image {

/// One 8-bit sRGB colour.
struct RGB {
  uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const RGB&, const RGB&) = default;
};

/// An 8-bit RGB image: rgb holds height*width*3 bytes, rows top to bottom, pixels left to right, R G B.
struct RGBImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;

  /// Pixel (x, y), x = column, y = row from the top. Precondition: in range.
  RGB at(int x, int y) const {
    size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Drawing: the one canvas and bitmap font every picture shadergrad draws uses (colour bars, debug plots).

/// The built-in 5x7 bitmap font: each glyph is 5 x 7 pixels with a 1-px gap (advance 6 px), times `scale`.
/// Letters (lower case is drawn as upper case), digits and the symbols space . , - + _ / ( ) : = [ ] ' * < > ? ! # % ^;
/// any other character is drawn as a box.
inline constexpr int kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;
/// Width in pixels of `s` drawn at `scale` (0 for an empty string).
int text_width(const std::string& s, int scale = 1);

/// An RGB image being drawn on. Coordinates are pixels, x to the right, y down; anything outside is clipped.
class Canvas {
 public:
  Canvas(int width, int height, RGB background);
  void put(int x, int y, RGB c);
  void rect(int x0, int y0, int w, int h, RGB c);  ///< filled
  void hline(int x0, int x1, int y, RGB c);
  void vline(int x, int y0, int y1, RGB c);
  /// Bresenham line drawn with a `thick` x `thick` pen; `dash` > 0 draws `dash` pixels on, `dash` off.
  void line(int x0, int y0, int x1, int y1, RGB c, int thick = 2, int dash = 0);
  /// Text in the 5x7 font, its top-left corner at (x0, y0).
  void text(int x0, int y0, const std::string& s, RGB c, int scale = 1);
  /// Text rotated 90 degrees counter-clockwise (reads bottom to top), its left end at (x0, y0 = bottom).
  void text_up(int x0, int y0, const std::string& s, RGB c, int scale = 1);
  int width() const { return img_.width; }
  int height() const { return img_.height; }
  const RGBImage& image() const { return img_; }
  RGBImage take() { return std::move(img_); }

 private:
  RGBImage img_;
};

/// Write an 8-bit RGB PNG (no alpha, no interlace). rgb: height*width*3 bytes as in RGBImage.
/// Atomic (temporary file + rename, see sg::io::write_file_atomic): `path` is never left half-written.
/// Throws sg::ValueError (non-positive size, rgb.size() != width*height*3), sg::IOError (encode/write failure).
void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb);
inline void write_png(const std::string& path, const RGBImage& img) {
  write_png(path, img.width, img.height, img.rgb);
}

/// Read any PNG (gray, gray+alpha, palette, RGB, RGBA; 1..16 bits; interlaced or not) as 8-bit RGB:
/// palette and low-bit gray are expanded, 16-bit samples scaled to 8 bits (round(v * 255 / 65535)), gray is
/// replicated to R=G=B, and alpha (including tRNS) is composited onto white: c' = (c*a + 255*(255-a)) / 255,
/// rounded. Gamma/colour-space chunks are ignored (samples are taken as stored).
/// Throws sg::IOError naming the file: missing, not a PNG (signature), or libpng's decode error.
RGBImage read_png(const std::string& path);

/// Read a PNG, a binary PGM (P5, maxval 1..65535) or a binary PPM (P6) as 8-bit RGB (PGM gray replicated;
/// samples with maxval != 255 rescaled to 0..255, rounded). The format is detected from the file's magic bytes.
/// Throws sg::IOError naming the file and, for malformed PNM headers/data, the byte offset.
RGBImage read_image(const std::string& path);

/// Read a PNG / PGM / PPM as grayscale in [0, 1], resized to out_h x out_w (row-major floats, out_h*out_w).
/// Gray = (0.299 R + 0.587 G + 0.114 B) / 255 (ITU-R BT.601 luma, as PIL's convert("L"), without its rounding).
/// Resizing is separable per axis: shrinking uses area averaging (each output pixel is the coverage-weighted
/// mean of the input pixels under it, like OpenCV INTER_AREA / torch adaptive_avg_pool2d for integer factors);
/// enlarging uses bilinear interpolation with half-pixel centres (torch interpolate align_corners=False).
/// No inversion is done (Fashion-MNIST objects are light on black: invert a dark-on-light photo yourself).
/// Throws sg::ValueError for out_h or out_w < 1, sg::IOError as read_image.
std::vector<float> read_image_gray(const std::string& path, int out_h, int out_w);

/// Warnings about a classifier input that does not look like the training data (light objects on a black
/// background, as Fashion-MNIST and the digits), for `predict`: gray is h x w in [0, 1] as fed to the model.
///  - nearly uniform (max - min < 0.05): e.g. a white-on-transparent PNG, whose alpha is composited onto white;
///  - a light background (mean of the border pixels > 0.5): dark strokes on light paper need --invert.
/// Returns one sentence per problem (empty when none). Throws sg::ValueError when gray.size() != h * w.
std::vector<std::string> input_warnings(const std::vector<float>& gray, int h, int w);

/// The resize used by read_image_gray, on a row-major h x w float image. Throws sg::ValueError for sizes < 1
/// or src.size() != h*w.
std::vector<float> resize_gray(const std::vector<float>& src, int h, int w, int out_h, int out_w);

// ---------------------------------------------------------------------------------------------------------------
// Colormaps (exact control points and marker colours in docs/COLORMAPS.md).

enum class Colormap {
  Auto,       ///< Diverging if any finite value < 0, else Viridis.
  Diverging,  ///< blue-white-red, symmetric around 0: 0 -> exactly white, -s -> blue, +s -> red.
  Viridis,    ///< sequential, matplotlib's viridis sampled at 17 points, dark purple (low) -> yellow (high).
  Gray,       ///< sequential, black (low) -> white (high).
};
const char* to_string(Colormap c);

inline constexpr RGB kNaNColor{255, 0, 255};     ///< NaN: magenta
inline constexpr RGB kPosInfColor{0, 255, 0};    ///< +Inf: pure green
inline constexpr RGB kNegInfColor{0, 255, 255};  ///< -Inf: cyan
inline constexpr RGB kSeparatorColor{128, 128, 128};   ///< 1-px lines between tiles
inline constexpr RGB kBackgroundColor{236, 236, 236};  ///< canvas around the grid and the legend

/// Diverging colour of v for the symmetric range [-scale, scale] (v clamped; scale <= 0 gives white).
RGB diverging_color(float v, float scale);
/// Sequential colour at t in [0, 1] (clamped) for Viridis or Gray.
RGB sequential_color(float t, Colormap cmap);
/// Colour of one value: NaN/±Inf markers; Diverging uses scale = max(|lo|, |hi|); Viridis/Gray map
/// t = (v - lo) / (hi - lo) (t = 0 when hi <= lo). cmap must not be Auto (throws sg::ValueError).
RGB map_value(float v, Colormap cmap, float lo, float hi);

struct RenderOptions {
  Colormap colormap = Colormap::Auto;
  int target_side = 256;  ///< small tensors are upscaled by the largest integer factor keeping the grid <= this
  int max_side = 2048;    ///< larger grids are downsampled by an integer stride (and tiles truncated) to fit
  bool legend = true;     ///< draw a colour bar with the range's end values under the image
  std::optional<float> vmin{}, vmax{};  ///< fix the colour range instead of the data's finite min/max
};

struct RenderResult {
  RGBImage image;
  Colormap colormap = Colormap::Viridis;  ///< the colormap used (never Auto)
  float min = 0, max = 0;  ///< finite min/max of the whole tensor (NaN if it has no finite value)
  float lo = 0, hi = 0;    ///< the colour range drawn (Diverging: -s..s with s = max(|min|, |max|))
  int64_t nan_count = 0, posinf_count = 0, neginf_count = 0;
  int grid_rows = 1, grid_cols = 1;  ///< tiles shown (N rows x C columns)
  int tile_h = 0, tile_w = 0;        ///< pixel size of one tile
  int grid_height = 0, grid_width = 0;  ///< rows*tile_h + (rows-1), cols*tile_w + (cols-1); legend lies below
  int scale = 1;   ///< nearest-neighbour upscale factor
  int stride = 1;  ///< downsampling stride (1 = every element shown)
  std::string note;  ///< empty, or what was downsampled/truncated/collapsed
};

/// Render a row-major f32 tensor as an image.
///  - rank 0 -> one pixel; rank 1 (n) -> a 1 x n strip (at least 16 px tall); rank 2 (R, C) -> R x C image;
///  - rank 3 (C, H, W) -> 1 x C tiles; rank 4 (N, C, H, W) -> N rows x C columns of H x W tiles; rank > 4:
///    leading dims are collapsed into N (noted). Tiles are separated by 1-px kSeparatorColor lines.
///  - Upscaling: scale = max(1, target_side / max(rows*h, cols*w)) (integer division, nearest neighbour);
///    an 8x8 tensor becomes 256x256.
///  - Downsampling: if the grid would exceed max_side, each tile shows every `stride`-th row/column (a
///    stride x stride block containing NaN/+Inf/-Inf shows that marker, in this priority), and if even
///    1-px tiles do not fit only the first (max_side+1)/2 tile rows/columns are shown; `note` says so.
///  - Colormap Auto: Diverging if any finite value < 0, else Viridis. NaN/±Inf always use the markers.
///  - Legend: below the grid, a colour bar spanning lo..hi over the canvas width (canvas >= 128 px wide), with
///    lo and hi printed ("%.3g"; Diverging also 0 at the centre) in the 5x7 font (Canvas) at scale
///    clamp(canvas width / 110, 2, 4): labels stay >= 14 px tall, about 1/16 of the image width.
/// An empty tensor (a zero dim) gives a 16x16 background image with a note. Throws sg::ValueError for a
/// negative dim or target_side/max_side < 1.
RenderResult render_tensor(const float* data, llvm::ArrayRef<int64_t> shape, const RenderOptions& opts = {});

}  // namespace sg::image
