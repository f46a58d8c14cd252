// shadergrad — PNG/PNM I/O, grayscale resize, colormaps and tensor rendering.
#include "sg/image.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <png.h>

#include "sg/error.h"
#include "sg/safetensors.h"

namespace sg::image {
namespace {

std::string read_all(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw IOError(fmt::format("cannot read {} '{}': not a regular file (a directory or device?)", what, path));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    throw IOError(fmt::format("cannot open {} '{}': {}.", what, path, std::strerror(e)));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(fmt::format("cannot read {} '{}'.", what, path));
  return bytes;
}

// ---- PNG decoding with libpng's low-level API (exact 8-bit samples, no gamma handling) ----

struct PngReadCtx {
  const std::string* bytes = nullptr;
  size_t pos = 0;
  std::string error;
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;
  std::vector<png_bytep> rows;
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<PngReadCtx*>(png_get_error_ptr(png));
  ctx->error = msg ? msg : "unknown libpng error";
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep out, png_size_t len) {
  auto* ctx = static_cast<PngReadCtx*>(png_get_io_ptr(png));
  if (ctx->pos + len > ctx->bytes->size()) png_error(png, "unexpected end of file (PNG data truncated)");
  std::memcpy(out, ctx->bytes->data() + ctx->pos, len);
  ctx->pos += len;
}

/// Decodes into ctx.rgba (RGBA8). Returns false with ctx.error set on failure. No C++ object with a destructor
/// lives in this frame, so libpng's longjmp back to setjmp is safe.
bool decode_png_rgba(PngReadCtx& ctx) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, png_error_fn, png_warning_fn);
  if (!png) {
    ctx.error = "png_create_read_struct failed";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    ctx.error = "png_create_info_struct failed";
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &ctx, png_read_fn);
  png_read_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  if (static_cast<uint64_t>(w) * h > (uint64_t(1) << 28)) png_error(png, "image larger than 2^28 pixels");
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_scale_16(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (!(color & PNG_COLOR_MASK_ALPHA)) png_set_filler(png, 0xff, PNG_FILLER_AFTER);  // no-op if tRNS added alpha
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 4) png_error(png, "unexpected row size after transforms");
  ctx.width = static_cast<int>(w);
  ctx.height = static_cast<int>(h);
  ctx.rgba.resize(static_cast<size_t>(w) * h * 4);
  ctx.rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) ctx.rows[y] = ctx.rgba.data() + static_cast<size_t>(y) * w * 4;
  png_read_image(png, ctx.rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

RGBImage decode_png(const std::string& bytes, const std::string& path) {
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0)
    throw IOError(fmt::format("'{}': byte offset 0: not a PNG file (missing the 8-byte PNG signature).", path));
  PngReadCtx ctx;
  ctx.bytes = &bytes;
  if (!decode_png_rgba(ctx))
    throw IOError(fmt::format("'{}': PNG decode failed near byte offset {}: {}.", path, ctx.pos, ctx.error));
  RGBImage img;
  img.width = ctx.width;
  img.height = ctx.height;
  const size_t npx = static_cast<size_t>(img.width) * static_cast<size_t>(img.height);
  img.rgb.resize(npx * 3);
  for (size_t i = 0; i < npx; ++i) {
    unsigned a = ctx.rgba[i * 4 + 3];
    for (int k = 0; k < 3; ++k) {
      unsigned c = ctx.rgba[i * 4 + static_cast<size_t>(k)];
      img.rgb[i * 3 + static_cast<size_t>(k)] = static_cast<uint8_t>((c * a + 255u * (255u - a) + 127u) / 255u);
    }
  }
  return img;
}

// ---- PNM (P5 / P6) ----

RGBImage decode_pnm(const std::string& b, const std::string& path) {
  const bool gray = b[1] == '5';
  size_t pos = 2;
  auto skip_ws = [&] {
    for (;;) {
      while (pos < b.size() && std::isspace(static_cast<unsigned char>(b[pos]))) ++pos;
      if (pos < b.size() && b[pos] == '#') {
        while (pos < b.size() && b[pos] != '\n') ++pos;
      } else {
        break;
      }
    }
  };
  auto read_int = [&](const char* what) {
    skip_ws();
    size_t start = pos;
    uint64_t v = 0;
    while (pos < b.size() && std::isdigit(static_cast<unsigned char>(b[pos])) && v < (1u << 30))
      v = v * 10 + static_cast<uint64_t>(b[pos++] - '0');
    if (pos == start)
      throw IOError(fmt::format("'{}': byte offset {}: malformed {} header: expected the {} (a decimal number).",
                                path, start, gray ? "PGM" : "PPM", what));
    return v;
  };
  uint64_t w = read_int("width"), h = read_int("height"), maxval = read_int("maxval");
  if (w == 0 || h == 0 || w * h > (uint64_t(1) << 28))
    throw IOError(fmt::format("'{}': unsupported image size {}x{}.", path, w, h));
  if (maxval == 0 || maxval > 65535)
    throw IOError(fmt::format("'{}': maxval {} out of range 1..65535.", path, maxval));
  if (pos >= b.size() || !std::isspace(static_cast<unsigned char>(b[pos])))
    throw IOError(fmt::format("'{}': byte offset {}: expected one whitespace byte after maxval.", path, pos));
  ++pos;
  const uint64_t ch = gray ? 1 : 3, bps = maxval > 255 ? 2 : 1;
  const uint64_t need = w * h * ch * bps;
  if (b.size() - pos < need)
    throw IOError(fmt::format("'{}': truncated {} data: data ends at byte offset {}, expected {} bytes of samples "
                              "from offset {} (up to offset {}).",
                              path, gray ? "PGM" : "PPM", b.size(), need, pos, pos + need));
  RGBImage img;
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  img.rgb.resize(w * h * 3);
  const auto* p = reinterpret_cast<const uint8_t*>(b.data() + pos);
  for (uint64_t i = 0; i < w * h; ++i) {
    for (uint64_t k = 0; k < 3; ++k) {
      uint64_t s = i * ch + (gray ? 0 : k);
      uint64_t v = bps == 2 ? (uint64_t(p[2 * s]) << 8) | p[2 * s + 1] : p[s];
      if (v > maxval) v = maxval;
      img.rgb[i * 3 + k] = static_cast<uint8_t>(maxval == 255 ? v : (v * 255 + maxval / 2) / maxval);
    }
  }
  return img;
}

// ---- resampling weights along one axis ----

struct Tap {
  int index;
  float weight;
};

/// For each of `out` output samples, the input samples and weights (summing to 1).
std::vector<std::vector<Tap>> axis_weights(int in, int out) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  if (out < in) {  // area averaging: output o covers input [o*in/out, (o+1)*in/out)
    const double r = static_cast<double>(in) / out;
    for (int o = 0; o < out; ++o) {
      double a = o * r, b = (o + 1) * r;
      for (int i = static_cast<int>(std::floor(a)); i < in && i < b; ++i) {
        double cover = std::min<double>(b, i + 1) - std::max<double>(a, i);
        if (cover > 1e-12) taps[static_cast<size_t>(o)].push_back({i, static_cast<float>(cover / r)});
      }
    }
  } else {  // bilinear, half-pixel centres
    const double r = static_cast<double>(in) / out;
    for (int o = 0; o < out; ++o) {
      double x = std::clamp((o + 0.5) * r - 0.5, 0.0, static_cast<double>(in - 1));
      int i0 = static_cast<int>(std::floor(x));
      int i1 = std::min(i0 + 1, in - 1);
      float f = static_cast<float>(x - i0);
      taps[static_cast<size_t>(o)].push_back({i0, 1.0f - f});
      if (i1 != i0 && f > 0) taps[static_cast<size_t>(o)].push_back({i1, f});
    }
  }
  return taps;
}

// ---- colormaps ----

struct Stop {
  float t;
  RGB c;
};

// ColorBrewer RdBu (5-class) end and quarter points, with the midpoint made pure white.
constexpr std::array<Stop, 5> kDiverging{{{-1.0f, {5, 113, 176}},
                                          {-0.5f, {146, 197, 222}},
                                          {0.0f, {255, 255, 255}},
                                          {0.5f, {244, 165, 130}},
                                          {1.0f, {202, 0, 32}}}};

// matplotlib viridis (_viridis_data, 256 entries) sampled at t = k/16 (entry t*255, linearly interpolated),
// rounded to 8 bits. Piecewise-linear between these deviates from the full table by at most 6/255.
constexpr std::array<RGB, 17> kViridis{{{68, 1, 84},    {72, 24, 106},  {71, 45, 123},   {66, 64, 134},
                                        {59, 82, 139},  {51, 99, 141},  {44, 114, 142},  {38, 129, 142},
                                        {33, 144, 140}, {31, 159, 136}, {40, 174, 128},  {62, 188, 116},
                                        {93, 201, 99},  {130, 211, 76}, {171, 220, 50},  {213, 226, 26},
                                        {253, 231, 37}}};

uint8_t lerp8(uint8_t a, uint8_t b, float f) {
  return static_cast<uint8_t>(std::lround(a + (static_cast<float>(b) - a) * f));
}
RGB lerp(RGB a, RGB b, float f) { return {lerp8(a.r, b.r, f), lerp8(a.g, b.g, f), lerp8(a.b, b.b, f)}; }

/// 5x7 glyphs: 7 rows of 5 bits (bit 4 = leftmost column). Upper case only; lower case is drawn upper case.
const uint8_t* glyph5x7(char ch) {
  static const uint8_t kLetters[26][7] = {
      {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // A
      {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},  // B
      {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E},  // C
      {0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E},  // D
      {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F},  // E
      {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},  // F
      {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F},  // G
      {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // H
      {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // I
      {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},  // J
      {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},  // K
      {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},  // L
      {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11},  // M
      {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},  // N
      {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // O
      {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},  // P
      {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D},  // Q
      {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},  // R
      {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E},  // S
      {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // T
      {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // U
      {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},  // V
      {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A},  // W
      {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},  // X
      {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04},  // Y
      {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},  // Z
  };
  static const uint8_t kDigits[10][7] = {
      {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},  // 0
      {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},  // 1
      {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},  // 2
      {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},  // 3
      {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},  // 4
      {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},  // 5
      {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},  // 6
      {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
      {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},  // 8
      {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},  // 9
  };
  struct Sym {
    char c;
    uint8_t rows[7];
  };
  static const Sym kSymbols[] = {
      {' ', {0, 0, 0, 0, 0, 0, 0}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},
      {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
      {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},
      {'_', {0, 0, 0, 0, 0, 0, 0x1F}},
      {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
      {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
      {'[', {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}},
      {']', {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}},
      {'\'', {0x04, 0x04, 0x08, 0, 0, 0, 0}},
      {'*', {0, 0x04, 0x15, 0x0E, 0x15, 0x04, 0}},
      {'<', {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}},
      {'>', {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}},
      {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04}},
      {'!', {0x04, 0x04, 0x04, 0x04, 0x04, 0, 0x04}},
      {'#', {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
      {'^', {0x04, 0x0A, 0x11, 0, 0, 0, 0}},
  };
  static const uint8_t kBox[7] = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F};
  if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
  if (ch >= 'A' && ch <= 'Z') return kLetters[ch - 'A'];
  if (ch >= '0' && ch <= '9') return kDigits[ch - '0'];
  for (const Sym& s : kSymbols)
    if (s.c == ch) return s.rows;
  return kBox;
}

/// Pixel writes on a bare image (render_tensor's tiles); Canvas::put clips the same way.
void put(RGBImage& img, int x, int y, RGB c) {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
  size_t i = (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
  img.rgb[i] = c.r;
  img.rgb[i + 1] = c.g;
  img.rgb[i + 2] = c.b;
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------
// Canvas and the 5x7 font

int text_width(const std::string& s, int scale) {
  return s.empty() ? 0 : (static_cast<int>(s.size()) * kGlyphAdvance - 1) * scale;
}

Canvas::Canvas(int width, int height, RGB bg) {
  img_.width = width;
  img_.height = height;
  img_.rgb.resize(static_cast<size_t>(std::max(width, 0)) * static_cast<size_t>(std::max(height, 0)) * 3);
  for (size_t i = 0; i < img_.rgb.size(); i += 3) {
    img_.rgb[i] = bg.r;
    img_.rgb[i + 1] = bg.g;
    img_.rgb[i + 2] = bg.b;
  }
}
void Canvas::put(int x, int y, RGB c) { sg::image::put(img_, x, y, c); }
void Canvas::rect(int x0, int y0, int w, int h, RGB c) {
  for (int y = y0; y < y0 + h; ++y)
    for (int x = x0; x < x0 + w; ++x) put(x, y, c);
}
void Canvas::hline(int x0, int x1, int y, RGB c) {
  for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) put(x, y, c);
}
void Canvas::vline(int x, int y0, int y1, RGB c) {
  for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y) put(x, y, c);
}
void Canvas::line(int x0, int y0, int x1, int y1, RGB c, int thick, int dash) {
  int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (int k = 0;; ++k) {
    if (dash <= 0 || (k / dash) % 2 == 0) rect(x0 - thick / 2, y0 - thick / 2, thick, thick, c);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}
void Canvas::text(int x0, int y0, const std::string& s, RGB c, int scale) {
  for (size_t k = 0; k < s.size(); ++k) {
    const uint8_t* g = glyph5x7(s[k]);
    for (int r = 0; r < kGlyphHeight; ++r)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (g[r] & (0x10 >> col))
          rect(x0 + (static_cast<int>(k) * kGlyphAdvance + col) * scale, y0 + r * scale, scale, scale, c);
  }
}
void Canvas::text_up(int x0, int y0, const std::string& s, RGB c, int scale) {
  for (size_t k = 0; k < s.size(); ++k) {
    const uint8_t* g = glyph5x7(s[k]);
    for (int r = 0; r < kGlyphHeight; ++r)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (g[r] & (0x10 >> col))
          rect(x0 + r * scale, y0 - (static_cast<int>(k) * kGlyphAdvance + col + 1) * scale, scale, scale, c);
  }
}

// ------------------------------------------------------------------------------------------------------------

void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  if (width < 1 || height < 1)
    throw ValueError(fmt::format("write_png('{}'): size {}x{} must be positive.", path, width, height));
  if (rgb.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * 3)
    throw ValueError(fmt::format("write_png('{}'): {} bytes given, expected width*height*3 = {}.", path,
                                 rgb.size(), static_cast<size_t>(width) * static_cast<size_t>(height) * 3));
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(width);
  img.height = static_cast<png_uint_32>(height);
  img.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&img, nullptr, &size, 0, rgb.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    throw IOError(fmt::format("write_png('{}'): libpng could not encode the image: {}.", path, msg));
  }
  std::string buf(size, '\0');
  if (!png_image_write_to_memory(&img, buf.data(), &size, 0, rgb.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    throw IOError(fmt::format("write_png('{}'): libpng could not encode the image: {}.", path, msg));
  }
  png_image_free(&img);
  buf.resize(size);
  io::write_file_atomic(path, buf);
}

RGBImage read_png(const std::string& path) { return decode_png(read_all(path, "PNG file"), path); }

RGBImage read_image(const std::string& path) {
  std::string b = read_all(path, "image");
  if (b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()), 0, 8) == 0) return decode_png(b, path);
  if (b.size() >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return decode_pnm(b, path);
  throw IOError(fmt::format("'{}': byte offset 0: unknown image format (supported: PNG, binary PGM 'P5', binary "
                            "PPM 'P6'). Convert it, e.g. `convert in.jpg out.png`.",
                            path));
}

std::vector<std::string> input_warnings(const std::vector<float>& gray, int h, int w) {
  if (h < 1 || w < 1 || gray.size() != static_cast<size_t>(h) * static_cast<size_t>(w))
    throw ValueError(fmt::format("input_warnings: {} values given for a {}x{} image.", gray.size(), h, w));
  std::vector<std::string> out;
  auto [lo, hi] = std::minmax_element(gray.begin(), gray.end());
  if (*hi - *lo < 0.05f) {
    out.push_back(fmt::format("the image is nearly uniform (gray levels {:.3f}..{:.3f}): nothing to classify. A PNG "
                              "with transparency is composited onto white, so white strokes on a transparent "
                              "background vanish; flatten it onto black first.", *lo, *hi));
    return out;
  }
  double border = 0;
  int count = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (y == 0 || x == 0 || y == h - 1 || x == w - 1) border += gray[static_cast<size_t>(y) * w + x], ++count;
  border /= count;
  if (border > 0.5)
    out.push_back(fmt::format("the background is light (border mean {:.2f}): the model was trained on light objects "
                              "on a black background: pass --invert for dark strokes on light paper (with --invert "
                              "given, the original was light on dark: drop it).", border));
  return out;
}

std::vector<float> resize_gray(const std::vector<float>& src, int h, int w, int out_h, int out_w) {
  if (h < 1 || w < 1 || out_h < 1 || out_w < 1)
    throw ValueError(fmt::format("resize_gray: sizes {}x{} -> {}x{} must be positive.", h, w, out_h, out_w));
  if (src.size() != static_cast<size_t>(h) * static_cast<size_t>(w))
    throw ValueError(fmt::format("resize_gray: {} values given for a {}x{} image.", src.size(), h, w));
  auto wy = axis_weights(h, out_h), wx = axis_weights(w, out_w);
  std::vector<float> tmp(static_cast<size_t>(h) * static_cast<size_t>(out_w));  // rows resized horizontally
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < out_w; ++x) {
      float s = 0;
      for (const Tap& t : wx[static_cast<size_t>(x)]) s += t.weight * src[static_cast<size_t>(y) * w + t.index];
      tmp[static_cast<size_t>(y) * out_w + x] = s;
    }
  std::vector<float> out(static_cast<size_t>(out_h) * static_cast<size_t>(out_w));
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x) {
      float s = 0;
      for (const Tap& t : wy[static_cast<size_t>(y)]) s += t.weight * tmp[static_cast<size_t>(t.index) * out_w + x];
      out[static_cast<size_t>(y) * out_w + x] = s;
    }
  return out;
}

std::vector<float> read_image_gray(const std::string& path, int out_h, int out_w) {
  if (out_h < 1 || out_w < 1)
    throw ValueError(fmt::format("read_image_gray('{}'): output size {}x{} must be positive.", path, out_h, out_w));
  RGBImage img = read_image(path);
  std::vector<float> gray(static_cast<size_t>(img.width) * static_cast<size_t>(img.height));
  for (size_t i = 0; i < gray.size(); ++i)
    gray[i] = (0.299f * img.rgb[i * 3] + 0.587f * img.rgb[i * 3 + 1] + 0.114f * img.rgb[i * 3 + 2]) / 255.0f;
  std::vector<float> out = resize_gray(gray, img.height, img.width, out_h, out_w);
  for (float& v : out) v = std::clamp(v, 0.0f, 1.0f);
  return out;
}

// ------------------------------------------------------------------------------------------------------------

const char* to_string(Colormap c) {
  switch (c) {
    case Colormap::Auto: return "auto";
    case Colormap::Diverging: return "diverging";
    case Colormap::Viridis: return "viridis";
    case Colormap::Gray: return "gray";
  }
  return "?";
}

RGB diverging_color(float v, float scale) {
  if (!(scale > 0) || v == 0) return kDiverging[2].c;
  float t = std::clamp(v / scale, -1.0f, 1.0f);
  for (size_t k = 0; k + 1 < kDiverging.size(); ++k) {
    if (t <= kDiverging[k + 1].t) {
      float f = (t - kDiverging[k].t) / (kDiverging[k + 1].t - kDiverging[k].t);
      return lerp(kDiverging[k].c, kDiverging[k + 1].c, f);
    }
  }
  return kDiverging.back().c;
}

RGB sequential_color(float t, Colormap cmap) {
  t = std::isnan(t) ? 0.0f : std::clamp(t, 0.0f, 1.0f);
  if (cmap == Colormap::Gray) {
    uint8_t g = static_cast<uint8_t>(std::lround(t * 255.0f));
    return {g, g, g};
  }
  float x = t * 16.0f;
  int k = std::min(static_cast<int>(x), 15);
  return lerp(kViridis[static_cast<size_t>(k)], kViridis[static_cast<size_t>(k) + 1], x - static_cast<float>(k));
}

RGB map_value(float v, Colormap cmap, float lo, float hi) {
  if (std::isnan(v)) return kNaNColor;
  if (std::isinf(v)) return v > 0 ? kPosInfColor : kNegInfColor;
  switch (cmap) {
    case Colormap::Diverging: return diverging_color(v, std::max(std::fabs(lo), std::fabs(hi)));
    case Colormap::Viridis:
    case Colormap::Gray: return sequential_color(hi > lo ? (v - lo) / (hi - lo) : 0.0f, cmap);
    case Colormap::Auto: break;
  }
  throw ValueError("map_value: resolve Colormap::Auto first (render_tensor does it from the data).");
}

namespace {

/// The colour bar under a tensor image: lo..hi across the canvas (`bar_h` px tall at `legend_y`), tick marks at
/// the ends (and 0 for Diverging), the end values (and 0) in the 5x7 font at `font` scale on row `text_y`.
void draw_legend(Canvas& cv, Colormap c, float lo, float hi, int legend_y, int bar_h, int text_y, int font) {
  const int canvas_w = cv.width();
  for (int x = 0; x < canvas_w; ++x) {
    float f = canvas_w > 1 ? static_cast<float>(x) / static_cast<float>(canvas_w - 1) : 0.0f;
    float v = lo + (hi - lo) * f;
    if (c == Colormap::Diverging && 2 * x == canvas_w - 1) v = 0;  // exact centre
    RGB col = map_value(v, c, lo, hi);
    for (int y = legend_y; y < legend_y + bar_h; ++y) cv.put(x, y, col);
  }
  for (int y = legend_y + bar_h; y < legend_y + bar_h + 2; ++y) {  // end and centre ticks
    cv.put(0, y, RGB{0, 0, 0});
    cv.put(canvas_w - 1, y, RGB{0, 0, 0});
    if (c == Colormap::Diverging) cv.put((canvas_w - 1) / 2, y, RGB{0, 0, 0});
  }
  std::string lo_s = fmt::format("{:.3g}", lo), hi_s = fmt::format("{:.3g}", hi);
  cv.text(1, text_y, lo_s, RGB{0, 0, 0}, font);
  cv.text(canvas_w - 1 - text_width(hi_s, font), text_y, hi_s, RGB{0, 0, 0}, font);
  const int mid_w = text_width("0", font), lo_end = 1 + text_width(lo_s, font),
            hi_start = canvas_w - 1 - text_width(hi_s, font);
  if (c == Colormap::Diverging && (canvas_w - mid_w) / 2 > lo_end + font * 4 &&
      (canvas_w + mid_w) / 2 < hi_start - font * 4)
    cv.text((canvas_w - mid_w) / 2, text_y, "0", RGB{0, 0, 0}, font);
}

}  // namespace

RenderResult render_tensor(const float* data, llvm::ArrayRef<int64_t> shape, const RenderOptions& opts) {
  if (opts.target_side < 1 || opts.max_side < 1)
    throw ValueError(fmt::format("render_tensor: target_side ({}) and max_side ({}) must be >= 1.",
                                 opts.target_side, opts.max_side));
  RenderResult res;
  std::vector<std::string> notes;
  int64_t total = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ValueError(fmt::format("render_tensor: negative dimension {} in the shape.", d));
    total *= d;
  }
  // Normalise to N x C x H x W.
  int64_t N = 1, C = 1, H = 1, W = 1;
  const size_t r = shape.size();
  if (r == 1) {
    W = shape[0];
  } else if (r == 2) {
    H = shape[0];
    W = shape[1];
  } else if (r == 3) {
    C = shape[0];
    H = shape[1];
    W = shape[2];
  } else if (r >= 4) {
    for (size_t i = 0; i + 3 < r; ++i) N *= shape[i];
    C = shape[r - 3];
    H = shape[r - 2];
    W = shape[r - 1];
    if (r > 4) notes.push_back(fmt::format("rank {}: leading {} dims collapsed into {} rows", r, r - 3, N));
  }

  // Statistics over every element.
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  for (int64_t i = 0; i < total; ++i) {
    float v = data[i];
    if (std::isnan(v)) ++res.nan_count;
    else if (std::isinf(v)) (v > 0 ? res.posinf_count : res.neginf_count)++;
    else {
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
  }
  if (mn > mx) mn = mx = std::numeric_limits<float>::quiet_NaN();
  res.min = mn;
  res.max = mx;
  res.colormap = opts.colormap;
  if (res.colormap == Colormap::Auto) res.colormap = (mn < 0) ? Colormap::Diverging : Colormap::Viridis;
  float lo = opts.vmin.value_or(std::isnan(mn) ? 0.0f : mn);
  float hi = opts.vmax.value_or(std::isnan(mx) ? 0.0f : mx);
  if (res.colormap == Colormap::Diverging) {
    float s = std::max(std::fabs(lo), std::fabs(hi));
    lo = -s;
    hi = s;
  }
  res.lo = lo;
  res.hi = hi;

  if (total == 0) {
    res.image = Canvas(16, 16, kBackgroundColor).take();
    res.grid_rows = res.grid_cols = 0;
    res.note = "empty tensor (a dimension is 0): nothing to draw";
    return res;
  }

  // Tiles shown and downsampling stride.
  const int64_t M = opts.max_side;
  int64_t rows = N, cols = C;
  if (rows * 2 - 1 > M) {
    notes.push_back(fmt::format("showing the first {} of {} tile rows", (M + 1) / 2, rows));
    rows = (M + 1) / 2;
  }
  if (cols * 2 - 1 > M) {
    notes.push_back(fmt::format("showing the first {} of {} tile columns", (M + 1) / 2, cols));
    cols = (M + 1) / 2;
  }
  int64_t k = 1;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  while (rows * ceil_div(H, k) + rows - 1 > M || cols * ceil_div(W, k) + cols - 1 > M) ++k;
  const int64_t th = ceil_div(H, k), tw = ceil_div(W, k);
  if (k > 1)
    notes.push_back(fmt::format("downsampled by stride {} (every {}-th row and column of each {}x{} tile; a block "
                                "holding NaN/Inf shows its marker)",
                                k, k, H, W));
  int64_t s = std::max<int64_t>(1, opts.target_side / std::max(rows * th, cols * tw));
  while (s > 1 && (rows * th * s + rows - 1 > M || cols * tw * s + cols - 1 > M)) --s;
  int64_t sy = s;
  if (r <= 1) sy = std::max<int64_t>(s, 16);  // a vector as a strip at least 16 px tall
  res.stride = static_cast<int>(k);
  res.scale = static_cast<int>(s);
  res.grid_rows = static_cast<int>(rows);
  res.grid_cols = static_cast<int>(cols);
  res.tile_h = static_cast<int>(th * sy);
  res.tile_w = static_cast<int>(tw * s);
  res.grid_height = static_cast<int>(rows * th * sy + rows - 1);
  res.grid_width = static_cast<int>(cols * tw * s + cols - 1);

  // Canvas: grid on top, legend below (labels about 1/16 of the width tall, at least 14 px: legible when the
  // report shows the image scaled down).
  int canvas_w = res.grid_width, canvas_h = res.grid_height;
  int legend_y = 0, bar_h = 10, text_y = 0;
  int font = 2;
  if (opts.legend) {
    canvas_w = std::max(canvas_w, 128);
    font = std::clamp(canvas_w / 110, 2, 4);
    bar_h = std::max(10, 4 * font);
    legend_y = res.grid_height + 4;
    text_y = legend_y + bar_h + 3;
    canvas_h = text_y + kGlyphHeight * font + 3;
  }
  Canvas cv(canvas_w, canvas_h, kBackgroundColor);
  // Separators between tiles.
  for (int64_t tr = 1; tr < rows; ++tr) {
    int y = static_cast<int>(tr * (th * sy + 1) - 1);
    for (int x = 0; x < res.grid_width; ++x) cv.put(x, y, kSeparatorColor);
  }
  for (int64_t tc = 1; tc < cols; ++tc) {
    int x = static_cast<int>(tc * (tw * s + 1) - 1);
    for (int y = 0; y < res.grid_height; ++y) cv.put(x, y, kSeparatorColor);
  }
  // Tiles.
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < cols; ++c) {
      const float* tile = data + (n * C + c) * H * W;
      const int y0 = static_cast<int>(n * (th * sy + 1)), x0 = static_cast<int>(c * (tw * s + 1));
      for (int64_t i = 0; i < th; ++i)
        for (int64_t j = 0; j < tw; ++j) {
          float v = tile[(i * k) * W + j * k];
          if (k > 1) {  // marker priority within the block: NaN > +Inf > -Inf
            int pri = std::isnan(v) ? 3 : (std::isinf(v) ? (v > 0 ? 2 : 1) : 0);
            for (int64_t a = i * k; a < std::min(H, (i + 1) * k) && pri < 3; ++a)
              for (int64_t b = j * k; b < std::min(W, (j + 1) * k); ++b) {
                float u = tile[a * W + b];
                int p = std::isnan(u) ? 3 : (std::isinf(u) ? (u > 0 ? 2 : 1) : 0);
                if (p > pri) {
                  pri = p;
                  v = u;
                }
              }
          }
          RGB col = map_value(v, res.colormap, lo, hi);
          for (int64_t dy = 0; dy < sy; ++dy)
            for (int64_t dx = 0; dx < s; ++dx)
              cv.put(x0 + static_cast<int>(j * s + dx), y0 + static_cast<int>(i * sy + dy), col);
        }
    }
  // Legend: colour bar over lo..hi, then the end values.
  if (opts.legend) draw_legend(cv, res.colormap, lo, hi, legend_y, bar_h, text_y, font);
  res.image = cv.take();
  for (size_t i = 0; i < notes.size(); ++i) res.note += (i ? "; " : "") + notes[i];
  return res;
}

}  // namespace sg::image
