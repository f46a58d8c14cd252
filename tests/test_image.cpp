// Tests for sg/image.h: PNG round trip and decoding of other colour types, PGM/PPM reading, grayscale resize
// (checked against PyTorch and by hand), colormaps and markers, and render_tensor's geometry.
#include <catch2/catch.hpp>

#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <png.h>

#include "sg/error.h"
#include "sg/image.h"

namespace Catch {
template <>
struct StringMaker<sg::image::RGB> {
  static std::string convert(const sg::image::RGB& c) {
    return "(" + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ")";
  }
};
}  // namespace Catch

namespace fs = std::filesystem;
using namespace sg::image;
using Catch::Matchers::Contains;

namespace {

using sg::testing::TempDir;

using sg::testing::read_file;
using sg::testing::write_file;

/// Writes a PNG with libpng's simplified API in the given format (independent of sg::image::write_png).
void write_png_format(const std::string& path, int w, int h, uint32_t format, const std::vector<uint8_t>& px) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = format;
  REQUIRE(png_image_write_to_file(&img, path.c_str(), 0, px.data(), 0, nullptr) != 0);
}

std::string run(const std::string& cmd) { return sg::testing::run_command(cmd); }

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const sg::IOError& e) {
    return e.what();
  }
  FAIL("expected sg::IOError");
  return "";
}

uint32_t be32(const std::string& s, size_t off) {
  return (uint32_t(uint8_t(s[off])) << 24) | (uint32_t(uint8_t(s[off + 1])) << 16) |
         (uint32_t(uint8_t(s[off + 2])) << 8) | uint32_t(uint8_t(s[off + 3]));
}

}  // namespace

TEST_CASE("PNG round trip is exact and the file is a valid PNG", "[image][png]") {
  TempDir dir;
  const int w = 7, h = 5;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  write_png(dir / "a.png", w, h, rgb);
  std::string bytes = read_file(dir / "a.png");
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(12, 4) == "IHDR");
  CHECK(be32(bytes, 16) == w);
  CHECK(be32(bytes, 20) == h);
  CHECK(bytes[24] == 8);  // bit depth
  CHECK(bytes[25] == 2);  // colour type RGB
  RGBImage img = read_png(dir / "a.png");
  CHECK(img.width == w);
  CHECK(img.height == h);
  CHECK(img.rgb == rgb);
  CHECK(read_image(dir / "a.png").rgb == rgb);
  CHECK(fs::directory_iterator(dir.path) != fs::directory_iterator());
  CHECK(std::distance(fs::directory_iterator(dir.path), {}) == 1);  // no temporaries left

  CHECK_THROWS_AS(write_png(dir / "b.png", 2, 2, std::vector<uint8_t>(11)), sg::ValueError);
  CHECK_THROWS_AS(write_png(dir / "missing/b.png", 1, 1, std::vector<uint8_t>(3)), sg::IOError);
}

TEST_CASE("read_png converts gray, gray+alpha and RGBA to RGB8", "[image][png]") {
  TempDir dir;
  write_png_format(dir / "g.png", 3, 1, PNG_FORMAT_GRAY, {0, 100, 255});
  RGBImage g = read_png(dir / "g.png");
  REQUIRE(g.width == 3);
  CHECK(g.at(1, 0) == RGB{100, 100, 100});
  CHECK(g.at(2, 0) == RGB{255, 255, 255});
  // Gray + alpha: alpha composited onto white, c' = round((c*a + 255*(255-a)) / 255).
  write_png_format(dir / "ga.png", 3, 1, PNG_FORMAT_GA, {50, 0, 50, 255, 50, 128});
  RGBImage ga = read_png(dir / "ga.png");
  CHECK(ga.at(0, 0) == RGB{255, 255, 255});
  CHECK(ga.at(1, 0) == RGB{50, 50, 50});
  const uint8_t mix = static_cast<uint8_t>((50 * 128 + 255 * 127 + 127) / 255);  // 152
  CHECK(ga.at(2, 0) == RGB{mix, mix, mix});
  write_png_format(dir / "rgba.png", 2, 1, PNG_FORMAT_RGBA, {10, 20, 30, 255, 200, 100, 0, 0});
  RGBImage rgba = read_png(dir / "rgba.png");
  CHECK(rgba.at(0, 0) == RGB{10, 20, 30});
  CHECK(rgba.at(1, 0) == RGB{255, 255, 255});
}

TEST_CASE("PNG read errors name the file", "[image][png]") {
  TempDir dir;
  write_file(dir / "not.png", "hello, I am text");
  std::string m = error_of([&] { read_png(dir / "not.png"); });
  CHECK_THAT(m, Contains(dir / "not.png"));
  CHECK_THAT(m, Contains("byte offset 0"));
  write_png(dir / "ok.png", 16, 16, std::vector<uint8_t>(16 * 16 * 3, 7));
  std::string bytes = read_file(dir / "ok.png");
  write_file(dir / "cut.png", bytes.substr(0, bytes.size() / 2));
  m = error_of([&] { read_png(dir / "cut.png"); });
  CHECK_THAT(m, Contains(dir / "cut.png"));
  m = error_of([&] { read_png(dir / "absent.png"); });
  CHECK_THAT(m, Contains(dir / "absent.png"));
  m = error_of([&] { read_image(dir / "not.png"); });
  CHECK_THAT(m, Contains("unknown image format"));
}

TEST_CASE("PGM/PPM reading and grayscale conversion", "[image][pnm]") {
  TempDir dir;
  // 4x2 8-bit PGM with a comment in the header.
  std::string pgm = "P5\n# a comment\n4 2\n255\n";
  const uint8_t px[8] = {0, 51, 102, 153, 204, 255, 17, 34};
  pgm.append(reinterpret_cast<const char*>(px), 8);
  write_file(dir / "a.pgm", pgm);
  std::vector<float> g = read_image_gray(dir / "a.pgm", 2, 4);
  REQUIRE(g.size() == 8);
  for (int i = 0; i < 8; ++i) CHECK(g[static_cast<size_t>(i)] == Approx(px[i] / 255.0).margin(1e-6));
  // 16-bit PGM (maxval 1000, big-endian samples): rescaled to 8 bits.
  std::string pgm16 = "P5 2 1 1000\n";
  pgm16 += std::string("\x03\xe8\x01\xf4", 4);  // 1000, 500
  write_file(dir / "b.pgm", pgm16);
  RGBImage b = read_image(dir / "b.pgm");
  CHECK(b.at(0, 0) == RGB{255, 255, 255});
  CHECK(b.at(1, 0) == RGB{128, 128, 128});  // round(500*255/1000) = 127.5 -> 128
  // PPM: gray = 0.299 R + 0.587 G + 0.114 B.
  std::string ppm = "P6 3 1 255\n";
  ppm += std::string("\xff\x00\x00\x00\xff\x00\x00\x00\xff", 9);
  write_file(dir / "c.ppm", ppm);
  std::vector<float> c = read_image_gray(dir / "c.ppm", 1, 3);
  CHECK(c[0] == Approx(0.299).margin(1e-6));
  CHECK(c[1] == Approx(0.587).margin(1e-6));
  CHECK(c[2] == Approx(0.114).margin(1e-6));
  // Truncated PGM: offset and expectation in the message.
  write_file(dir / "t.pgm", "P5 4 4 255\n" + std::string(10, 'x'));
  std::string m = error_of([&] { read_image(dir / "t.pgm"); });
  CHECK_THAT(m, Contains(dir / "t.pgm"));
  CHECK_THAT(m, Contains("byte offset 21"));
  CHECK_THAT(m, Contains("16 bytes"));
  write_file(dir / "h.pgm", "P5 4 x 255\n");
  CHECK_THAT(error_of([&] { read_image(dir / "h.pgm"); }), Contains("byte offset 5"));
}

TEST_CASE("resize_gray: area averaging by hand and against PyTorch", "[image][resize]") {
  // Area, non-integer factor 3 -> 2: out0 = (x0 + x1/2) / 1.5, out1 = (x1/2 + x2) / 1.5.
  std::vector<float> r = resize_gray({3, 6, 9}, 1, 3, 1, 2);
  CHECK(r[0] == Approx((3 + 3) / 1.5));
  CHECK(r[1] == Approx((3 + 9) / 1.5));
  // Same size is the identity.
  std::vector<float> id{1, 2, 3, 4, 5, 6};
  CHECK(resize_gray(id, 2, 3, 2, 3) == id);

  // Integer downscale (area) and bilinear upscale against torch.nn.functional.interpolate.
  std::vector<float> src(6 * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 7) % 11) / 10.0f;
  std::vector<float> down = resize_gray(src, 6, 8, 3, 4);
  std::vector<float> up = resize_gray(src, 6, 8, 9, 13);
  std::string py = run(
      "/usr/bin/python3 -c \"import torch, torch.nn.functional as F; "
      "x=torch.tensor([((i*7)%11)/10 for i in range(48)], dtype=torch.float32).reshape(1,1,6,8); "
      "print(*F.interpolate(x, size=(3,4), mode='area').flatten().tolist()); "
      "print(*F.interpolate(x, size=(9,13), mode='bilinear', align_corners=False).flatten().tolist())\"");
  std::istringstream ss(py);
  for (float v : down) {
    double t;
    REQUIRE(ss >> t);
    CHECK(v == Approx(t).margin(1e-5));
  }
  for (float v : up) {
    double t;
    REQUIRE(ss >> t);
    CHECK(v == Approx(t).margin(1e-5));
  }
  double extra;
  CHECK_FALSE(ss >> extra);
}

TEST_CASE("colormaps: diverging white at 0, markers for NaN and Inf", "[image][colormap]") {
  CHECK(diverging_color(0.0f, 3.0f) == RGB{255, 255, 255});
  CHECK(diverging_color(-3.0f, 3.0f) == RGB{5, 113, 176});
  CHECK(diverging_color(3.0f, 3.0f) == RGB{202, 0, 32});
  CHECK(diverging_color(-1.5f, 3.0f) == RGB{146, 197, 222});
  CHECK(diverging_color(10.0f, 3.0f) == RGB{202, 0, 32});  // clamped
  CHECK(diverging_color(1.0f, 0.0f) == RGB{255, 255, 255});
  // Halfway between white and the +0.5 stop (244,165,130): round((255+244)/2, ...).
  CHECK(diverging_color(0.75f, 3.0f) == RGB{250, 210, 193});
  CHECK(sequential_color(0.0f, Colormap::Viridis) == RGB{68, 1, 84});
  CHECK(sequential_color(1.0f, Colormap::Viridis) == RGB{253, 231, 37});
  CHECK(sequential_color(0.5f, Colormap::Viridis) == RGB{33, 144, 140});
  CHECK(sequential_color(0.5f, Colormap::Gray) == RGB{128, 128, 128});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (Colormap c : {Colormap::Diverging, Colormap::Viridis, Colormap::Gray}) {
    CHECK(map_value(nan, c, -1, 1) == RGB{255, 0, 255});
    CHECK(map_value(inf, c, -1, 1) == kPosInfColor);
    CHECK(map_value(-inf, c, -1, 1) == kNegInfColor);
  }
  CHECK(kPosInfColor != kNegInfColor);
  CHECK(kPosInfColor != kNaNColor);
  CHECK_THROWS_AS(map_value(0, Colormap::Auto, 0, 1), sg::ValueError);
}

TEST_CASE("render_tensor: all-zero diverging is white, NaN/Inf show markers", "[image][render]") {
  std::vector<float> zeros(16, 0.0f);
  RenderOptions div;
  div.colormap = Colormap::Diverging;
  RenderResult z = render_tensor(zeros.data(), {4, 4}, div);
  CHECK(z.colormap == Colormap::Diverging);
  CHECK(z.scale == 64);
  REQUIRE(z.grid_width == 256);
  REQUIRE(z.grid_height == 256);
  for (int y = 0; y < z.grid_height; y += 7)
    for (int x = 0; x < z.grid_width; x += 5) REQUIRE(z.image.at(x, y) == RGB{255, 255, 255});
  // Auto on non-negative data picks the sequential map.
  CHECK(render_tensor(zeros.data(), {4, 4}).colormap == Colormap::Viridis);

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> t{1, -2, nan, 4, inf, 0, -inf, 3, 0.5f};
  RenderResult r = render_tensor(t.data(), {3, 3});
  CHECK(r.colormap == Colormap::Diverging);  // has negatives
  CHECK(r.nan_count == 1);
  CHECK(r.posinf_count == 1);
  CHECK(r.neginf_count == 1);
  CHECK(r.min == -2.0f);
  CHECK(r.max == 4.0f);
  CHECK(r.lo == -4.0f);
  CHECK(r.hi == 4.0f);
  const int s = r.scale;  // 256 / 3 = 85
  CHECK(s == 85);
  auto px = [&](int row, int col) { return r.image.at(col * s + s / 2, row * s + s / 2); };
  CHECK(px(0, 2) == kNaNColor);
  CHECK(px(1, 2) == RGB{255, 255, 255});  // value 0
  CHECK(px(1, 1) == kPosInfColor);
  CHECK(px(2, 0) == kNegInfColor);
  CHECK(px(1, 0) == RGB{202, 0, 32});  // 4 = +scale
  CHECK(px(2, 1) == diverging_color(3.0f, 4.0f));
  CHECK(px(0, 1) == RGB{146, 197, 222});  // -2 of scale 4 is the -0.5 stop
}

TEST_CASE("render_tensor: upscaling, tile grid geometry, legend", "[image][render]") {
  std::vector<float> digit(64);
  for (size_t i = 0; i < 64; ++i) digit[i] = static_cast<float>(i) / 63.0f;
  RenderResult d = render_tensor(digit.data(), {8, 8});
  CHECK(d.scale == 32);
  CHECK(d.grid_width == 256);
  CHECK(d.grid_height == 256);
  CHECK(d.image.width >= 128);
  CHECK(d.image.height > d.grid_height);  // legend below
  CHECK(d.note.empty());
  CHECK(d.image.at(0, 0) == sequential_color(0.0f, Colormap::Viridis));
  CHECK(d.image.at(255, 255) == sequential_color(1.0f, Colormap::Viridis));
  // Legend bar: left end = colour of lo, right end = colour of hi.
  const int bar_y = d.grid_height + 4 + 5;
  CHECK(d.image.at(0, bar_y) == sequential_color(0.0f, Colormap::Viridis));
  CHECK(d.image.at(d.image.width - 1, bar_y) == sequential_color(1.0f, Colormap::Viridis));

  // 4-D (N=2, C=3, H=5, W=4): N rows x C columns of tiles with 1-px separators.
  const int64_t N = 2, C = 3, H = 5, W = 4;
  std::vector<float> t(N * C * H * W);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i % 17);
  RenderOptions noleg;
  noleg.legend = false;
  RenderResult g = render_tensor(t.data(), {N, C, H, W}, noleg);
  const int s = static_cast<int>(256 / std::max(N * H, C * W));  // 256 / 12 = 21
  CHECK(g.scale == s);
  CHECK(g.grid_rows == N);
  CHECK(g.grid_cols == C);
  CHECK(g.tile_h == H * s);
  CHECK(g.tile_w == W * s);
  CHECK(g.image.width == C * W * s + (C - 1));
  CHECK(g.image.height == N * H * s + (N - 1));
  CHECK(g.image.at(static_cast<int>(W * s), 0) == kSeparatorColor);           // first column separator
  CHECK(g.image.at(0, static_cast<int>(H * s)) == kSeparatorColor);           // row separator
  // Element (n=1, c=2, i=3, j=1) sits in tile (1, 2).
  const int64_t n = 1, c = 2, i = 3, j = 1;
  const float v = t[static_cast<size_t>(((n * C + c) * H + i) * W + j)];
  const int x = static_cast<int>(c * (W * s + 1) + j * s + s / 2), y = static_cast<int>(n * (H * s + 1) + i * s + s / 2);
  CHECK(g.image.at(x, y) == map_value(v, Colormap::Viridis, 0.0f, 16.0f));
  // 3-D (C, H, W) is one row of C tiles.
  RenderResult c3 = render_tensor(t.data(), {C, H, W}, noleg);
  CHECK(c3.grid_rows == 1);
  CHECK(c3.grid_cols == C);
  // 1-D strip.
  RenderResult v1 = render_tensor(t.data(), {10});
  CHECK(v1.grid_width == 250);
  CHECK(v1.grid_height >= 16);
}

TEST_CASE("render_tensor: large tensors are downsampled with a note", "[image][render]") {
  std::vector<float> big(3000 * 10, 1.0f);
  big[2 * 10 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 2, col 1: not on the stride-2 grid
  RenderOptions o;
  o.legend = false;
  RenderResult r = render_tensor(big.data(), {3000, 10}, o);
  CHECK(r.stride == 2);
  CHECK(r.grid_height == 1500);
  CHECK(r.grid_width == 5);
  CHECK_THAT(r.note, Contains("stride 2"));
  CHECK(r.image.at(0, 1) == kNaNColor);  // block (rows 2-3, cols 0-1) holds the NaN
  CHECK(r.nan_count == 1);
  // Too many tiles: only the first (max_side+1)/2 rows shown.
  std::vector<float> many(5000, 0.0f);
  o.max_side = 99;
  RenderResult m = render_tensor(many.data(), {5000, 1, 1, 1}, o);
  CHECK(m.grid_rows == 50);
  CHECK(m.image.height <= 99);
  CHECK_THAT(m.note, Contains("first 50 of 5000"));
  // Empty tensor.
  RenderResult e = render_tensor(nullptr, {0, 3});
  CHECK_FALSE(e.note.empty());
  CHECK_THROWS_AS(render_tensor(nullptr, {-1}), sg::ValueError);
}

TEST_CASE("render_tensor: colour bar labels are legible (5x7 font, >= 14 px tall, ~1/16 of the width)",
          "[image][render]") {
  // Left of the image (x >= 1: right of the bar's end tick) the only black pixels below the grid are the glyphs of
  // the lo label: their vertical extent is 7 rows x the font scale.
  auto label_height = [](const RenderResult& r) {
    int top = -1, bottom = -1;
    for (int y = r.grid_height; y < r.image.height; ++y)
      for (int x = 1; x < r.image.width / 4; ++x)
        if (r.image.at(x, y) == RGB{0, 0, 0}) {
          if (top < 0) top = y;
          bottom = y;
        }
    return top < 0 ? 0 : bottom - top + 1;
  };
  std::vector<float> small(64), wide(128 * 784);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<float>(i) - 31.5f;
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i)));
  RenderResult a = render_tensor(small.data(), {8, 8});  // 256 px wide: scale 2
  RenderResult b = render_tensor(wide.data(), {8, 16, 28, 28});  // the MNIST MLP's W1 as tiles: 463 px wide
  REQUIRE(a.image.width == 256);
  REQUIRE(b.image.width == 16 * 28 + 15);
  CHECK(label_height(a) == 14);           // scale 2
  CHECK(label_height(b) == 7 * (463 / 110));  // scale 4: 28 px
  CHECK(label_height(b) * 16 >= b.image.width - 16);
  // the diverging bar's centre is labelled 0 in the middle third
  bool centre_black = false;
  for (int y = b.grid_height + 20; y < b.image.height; ++y)
    for (int x = b.image.width / 3; x < 2 * b.image.width / 3; ++x) centre_black |= b.image.at(x, y) == RGB{0, 0, 0};
  CHECK(centre_black);
}

TEST_CASE("render_tensor output writes as PNG", "[image][render][png]") {
  TempDir dir;
  std::vector<float> t{-1, 0, 1, 2};
  RenderResult r = render_tensor(t.data(), {2, 2});
  write_png(dir / "t.png", r.image);
  RGBImage back = read_png(dir / "t.png");
  CHECK(back.width == r.image.width);
  CHECK(back.rgb == r.image.rgb);
}
