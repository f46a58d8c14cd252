// Tests for sg/texture_layout.h and the headless EGL/GLES device (sg/gles_device.h).
// They run on Mesa llvmpipe here and in CI; if no GLES context can be created they FAIL with the
// BackendError message (GLES is required, not optional).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "sg/error.h"
#include "sg/gles_device.h"
#include "sg/texture_layout.h"

using sg::TextureLayout;
using sg::gles::Device;
using sg::gles::DeviceOptions;
using sg::gles::Texture;

namespace {

/// One shared device per options value; creation failure fails the test with the backend's message.
std::unique_ptr<Device> make_device(DeviceOptions opts = {}) {
  try {
    return Device::create(opts);
  } catch (const sg::Error& e) {
    FAIL("gles::Device::create failed: " << e.what());
  }
  return nullptr;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

const char* kMulAddShader = R"(#version 300 es
precision highp float;
precision highp sampler2D;
uniform highp sampler2D u_a;
uniform highp sampler2D u_b;
out vec4 o_color;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  o_color = texelFetch(u_a, p, 0) * texelFetch(u_b, p, 0) + 1.0;
}
)";

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// TextureLayout (no GL)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("TextureLayout sizes and element locations match a brute-force walk", "[texture_layout]") {
  const int64_t max_width = 16, max_height = 100;  // 4097 elements wrap onto 65 rows of 16 texels
  for (int64_t numel : {0, 1, 3, 4, 5, 4097}) {
    CAPTURE(numel);
    TextureLayout l = TextureLayout::for_numel(numel, max_width, max_height);
    // Expected sizes computed independently with floating point.
    const int64_t texels = static_cast<int64_t>(std::ceil(static_cast<double>(numel) / 4.0));
    CHECK(l.numel == numel);
    CHECK(l.texels == texels);
    if (numel == 0) {
      CHECK(l.width == 1);
      CHECK(l.height == 1);
    } else {
      CHECK(l.width == std::min<int64_t>(texels, max_width));
      CHECK(l.height == static_cast<int64_t>(std::ceil(static_cast<double>(texels) / l.width)));
    }
    CHECK(l.width * l.height >= l.texels);
    CHECK(l.padded_floats() == l.width * l.height * 4);

    // Brute force: walk the texture row by row, texel by texel, component by component.
    int64_t e = 0;
    for (int64_t y = 0; y < l.height; ++y)
      for (int64_t x = 0; x < l.width; ++x)
        for (int c = 0; c < 4; ++c, ++e) {
          if (e >= numel) continue;
          const auto loc = l.locate(e);
          INFO("element " << e);
          REQUIRE(loc.x == x);
          REQUIRE(loc.y == y);
          REQUIRE(loc.component == c);
        }
    CHECK(e == l.padded_floats());
    if (numel > 0) CHECK(l.rows_for(numel) == l.locate(numel - 1).y + 1);
  }
  // 4097 elements: 1025 texels, 16 wide -> 65 rows, last row holds one texel with one element.
  TextureLayout big = TextureLayout::for_numel(4097, 16, 100);
  CHECK(big.width == 16);
  CHECK(big.height == 65);
  CHECK(big.locate(4096) == TextureLayout::Location{0, 64, 0});
}

TEST_CASE("TextureLayout rejects tensors that do not fit and bad arguments", "[texture_layout]") {
  // Without max_height the limit is square (GL's MAX_TEXTURE_SIZE bounds both dimensions).
  CHECK(TextureLayout::for_numel(4 * 16 * 16, 16).height == 16);  // exactly 16x16 texels
  CHECK_THROWS_AS(TextureLayout::for_numel(4 * 16 * 16 + 1, 16), sg::ValueError);
  CHECK_THROWS_AS(TextureLayout::for_numel(4097, 16), sg::ValueError);  // 65 rows > 16
  CHECK(TextureLayout::for_numel(4 * 16 * 20, 16, 20).height == 20);
  CHECK_THROWS_AS(TextureLayout::for_numel(4 * 16 * 20 + 1, 16, 20), sg::ValueError);
  CHECK_THROWS_AS(TextureLayout::for_numel(-1, 16), sg::ValueError);
  CHECK_THROWS_AS(TextureLayout::for_numel(10, 0), sg::ValueError);
  CHECK_THROWS_AS(TextureLayout::for_numel(10, 16, -1), sg::ValueError);
  CHECK_THROWS_WITH(TextureLayout::for_numel(4 * 16 * 16 + 1, 16), Catch::Contains("16x17"));
}

TEST_CASE("TextureLayout::for_shape keeps every tensor row inside one texture row", "[texture_layout]") {
  struct Case {
    std::vector<int64_t> shape;
    int64_t max_width, width;  // expected width
  };
  for (const Case& c : {Case{{128, 784}, 32768, 196},   // 196-texel rows, one per texture row
                        Case{{64, 8, 8, 8}, 16384, 64},  // 2-texel rows, 32 per texture row
                        Case{{5, 12}, 16384, 15},        // 3-texel rows: all 5 rows on one texture row
                        Case{{100, 4}, 16, 16},          // 1-texel rows, capped by max_width
                        Case{{784, 128}, 7, 7}}) {       // 32-texel rows do not fit width 7: rows wrap
    INFO("shape[0]=" << c.shape[0] << " max_width=" << c.max_width);
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    TextureLayout l = TextureLayout::for_shape(c.shape, c.max_width, 1 << 20);
    CHECK(l.numel == n);
    CHECK(l.texels == (n + 3) / 4);
    CHECK(l.width == c.width);
    CHECK(l.width * l.height >= l.texels);
    CHECK(l.width <= c.max_width);
    const int64_t last = c.shape.back();
    if (last / 4 <= c.max_width) {
      CHECK(l.width % (last / 4) == 0);
      for (int64_t r = 0; r * last < n; ++r) {  // a tensor row never straddles two texture rows
        CHECK(l.locate(r * last).y == l.locate(r * last + last - 1).y);
        CHECK(l.locate(r * last).x % (last / 4) == 0);
      }
    }
  }
  // shapes without whole-texel rows, and 1-D tensors, keep for_numel's layout when the width limit is 64 or less
  auto numel_of = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  };
  for (std::vector<int64_t> shape : {std::vector<int64_t>{128, 10}, {1000}, {3, 7, 13}})
    CHECK(TextureLayout::for_shape(shape, 16, 1024) == TextureLayout::for_numel(numel_of(shape), 16, 1024));
  // ... and are otherwise a near-square block, the widest power of two not above sqrt(texels), at most 64 wide
  // (several quad rows: CPU rasterisers give quad rows to their threads), elements still row-major
  struct Block {
    std::vector<int64_t> shape;
    int64_t width, height;
  };
  for (const Block& c : {Block{{128, 10}, 16, 20},  // 320 texels
                         Block{{1000}, 8, 32},       // 250 texels: 16 x 16 would be 256
                         Block{{3, 7, 13}, 8, 9},    // 69 texels
                         Block{{100000}, 64, 391},   // 25000 texels: capped at 64
                         Block{{8, 1, 3, 3}, 4, 5},  // 18 texels (a conv filter)
                         Block{{16, 10}, 4, 10},     // 40 texels
                         Block{{256}, 8, 8},         // 64 texels
                         Block{{10}, 1, 3}}) {       // 3 texels
    const TextureLayout l = TextureLayout::for_shape(c.shape, 32768);
    INFO("numel " << numel_of(c.shape));
    CHECK(l.numel == numel_of(c.shape));
    CHECK(l.texels == (l.numel + 3) / 4);
    CHECK(l.width == c.width);
    CHECK(l.height == c.height);
    CHECK(l.locate(l.numel - 1).x == (l.texels - 1) % c.width);  // element e still lives in texel e / 4, row-major
    CHECK(l.locate(l.numel - 1).y == (l.texels - 1) / c.width);
  }
  // too tall as a block: for_numel's layout (rows at the width limit)
  CHECK(TextureLayout::for_shape({100000}, 32768, 100) == TextureLayout::for_numel(100000, 32768, 100));
  CHECK_THROWS_AS(TextureLayout::for_shape({40, 8}, 2, 16), sg::ValueError);  // 80 texels need 40 rows of 2
}

// ---------------------------------------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("GLES device creation and capabilities", "[gles]") {
  auto dev = make_device();
  const auto& c = dev->caps();
  INFO(dev->caps_json().dump(2));
  CHECK_FALSE(c.renderer.empty());
  CHECK(c.version.rfind("OpenGL ES 3", 0) == 0);
  CHECK(c.max_texture_size >= 4096);
  CHECK(dev->max_texture_width() == c.max_texture_size);
  CHECK(c.color_buffer_float);
  CHECK(c.fp32_roundtrip_ok);
  CHECK(c.roundtrip_detail == "bit-exact (8 values)");
  CHECK(c.highp_float_precision >= 23);
  CHECK_FALSE(c.egl_platform.empty());
  CHECK(dev->caps_json()["max_texture_size"].get<int64_t>() == c.max_texture_size);
  CHECK(dev->live_objects() == sg::gles::LiveObjects{});
}

TEST_CASE("GLES device options are validated", "[gles]") {
  DeviceOptions bad;
  bad.max_texture_width = -1;
  CHECK_THROWS_AS(Device::create(bad), sg::ValueError);
  DeviceOptions huge;
  huge.max_texture_width = int64_t{1} << 40;
  CHECK_THROWS_AS(Device::create(huge), sg::ValueError);
  DeviceOptions plat;
  plat.platform = "x11";
  CHECK_THROWS_AS(Device::create(plat), sg::ValueError);
}

TEST_CASE("GLES surfaceless platform works on its own", "[gles]") {
  // The Mesa path CI relies on; run it explicitly even when the device platform was picked first.
  DeviceOptions opts;
  opts.platform = "surfaceless";
  auto dev = make_device(opts);
  CHECK(dev->caps().egl_platform == "surfaceless");
  CHECK(dev->caps().fp32_roundtrip_ok);
}

TEST_CASE("GLES a failed platform attempt leaves EGL usable", "[gles]") {
  // eglGetDisplay(EGL_DEFAULT_DISPLAY) fails on headless Mesa (EGL_NOT_INITIALIZED); whether it fails or
  // not, a later device must still come up, and two devices must coexist.
  DeviceOptions def;
  def.platform = "default";
  try {
    auto d = Device::create(def);
    CHECK(d->caps().egl_platform == "default");
  } catch (const sg::BackendError& e) {
    CHECK_THAT(e.what(), Catch::Contains("default:"));
  }
  auto first = make_device();
  auto second = make_device();
  Texture t1 = first->create_texture(4, "t1"), t2 = second->create_texture(4, "t2");
  const float v1[4] = {1, 2, 3, 4}, v2[4] = {5, 6, 7, 8};
  first->upload(t1, v1, 4);
  second->upload(t2, v2, 4);
  second.reset();  // ending one device must not end the other's (shared) EGL display
  t2 = Texture();
  float r[4];
  first->download(t1, r, 4);
  for (int i = 0; i < 4; ++i) CHECK(r[i] == v1[i]);
}

TEST_CASE("GLES upload/download round trip with wrapped rows", "[gles]") {
  DeviceOptions opts;
  opts.max_texture_width = 16;
  auto dev = make_device(opts);
  const int64_t W = 16, H = 5;
  const int64_t n = 4 * W * H + 3;  // H full rows + one texel of a 6th row
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  std::vector<float> host(static_cast<size_t>(n));
  for (auto& v : host) v = dist(rng);
  host[7] = 1e-30f;
  host[8] = -0.0f;

  Texture t = dev->create_texture(n, "roundtrip");
  CHECK(t.width() == 16);
  CHECK(t.height() == 6);
  CHECK(t.layout() == TextureLayout::for_numel(n, 16));
  dev->upload(t, host.data(), n);
  std::vector<float> back(static_cast<size_t>(n), 42.0f);
  dev->download(t, back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    INFO("element " << i);
    REQUIRE(same_bits(back[static_cast<size_t>(i)], host[static_cast<size_t>(i)]));
  }
  // Partial download reads the prefix.
  std::vector<float> prefix(5, 0.0f);
  dev->download(t, prefix.data(), 5);
  for (int i = 0; i < 5; ++i) CHECK(same_bits(prefix[static_cast<size_t>(i)], host[static_cast<size_t>(i)]));
  // Size errors.
  CHECK_THROWS_AS(dev->upload(t, host.data(), n + 1), sg::ValueError);
  CHECK_THROWS_AS(dev->download(t, back.data(), n + 1), sg::ValueError);
  const int64_t too_many = 4 * 16 * dev->caps().max_texture_size + 1;  // one row more than the limit
  CHECK_THROWS_AS(dev->create_texture(too_many), sg::ValueError);
}

TEST_CASE("GLES large uploads (pixel unpack buffer) are exact, zero the rest, and do not disturb each other",
          "[gles]") {
  DeviceOptions opts;
  opts.max_texture_width = 256;
  auto dev = make_device(opts);
  const int64_t n = 100003;  // 400 KB: over the 64 KiB from which uploads go through the unpack buffer
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  a[11] = -0.0f;
  a[12] = std::numeric_limits<float>::denorm_min();
  Texture ta = dev->create_texture(n, "pbo_a"), tb = dev->create_texture(n, "pbo_b");
  // two uploads back to back through the same (orphaned) buffer, then read both
  dev->upload(ta, a.data(), n);
  dev->upload(tb, b.data(), n);
  std::vector<float> back(static_cast<size_t>(n));
  dev->download(ta, back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    INFO("a, element " << i);
    REQUIRE(same_bits(back[static_cast<size_t>(i)], a[static_cast<size_t>(i)]));
  }
  dev->download(tb, back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    INFO("b, element " << i);
    REQUIRE(same_bits(back[static_cast<size_t>(i)], b[static_cast<size_t>(i)]));
  }
  // a shorter upload overwrites the prefix and zeros everything after it
  const int64_t m = 70001;
  dev->upload(ta, b.data(), m);
  dev->download(ta, back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    INFO("partial upload, element " << i);
    REQUIRE(same_bits(back[static_cast<size_t>(i)], i < m ? b[static_cast<size_t>(i)] : 0.0f));
  }
  // an upload of nothing zeros the whole texture
  dev->upload(tb, nullptr, 0);
  dev->download(tb, back.data(), n);
  CHECK(std::all_of(back.begin(), back.end(), [](float v) { return same_bits(v, 0.0f); }));
  // a small upload (client memory) right after a large one: the unpack buffer must not be left bound, or the
  // small upload's pointer would be read as an offset into it
  Texture small = dev->create_texture(37, "small_after_large");
  dev->upload(ta, a.data(), n);
  dev->upload(small, b.data(), 37);
  std::vector<float> sback(37);
  dev->download(small, sback.data(), 37);
  for (int i = 0; i < 37; ++i) CHECK(same_bits(sback[static_cast<size_t>(i)], b[static_cast<size_t>(i)]));
}

TEST_CASE("GLES elementwise kernel a*b+1 matches the CPU exactly, padding zero", "[gles]") {
  DeviceOptions opts;
  opts.max_texture_width = 16;
  auto dev = make_device(opts);
  const int64_t n = 4 * 16 * 3 + 5;  // wraps and leaves a partly filled last row
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);

  Texture ta = dev->create_texture(n, "a"), tb = dev->create_texture(n, "b");
  // The output has the inputs' physical shape but is sized to read back every texel, padding included.
  TextureLayout full = ta.layout();
  full.texels = full.width * full.height;
  full.numel = full.padded_floats();
  Texture out = dev->create_texture(full, "out");
  dev->upload(ta, a.data(), n);
  dev->upload(tb, b.data(), n);
  auto prog = dev->create_program(kMulAddShader, "mul_add");
  CHECK(prog.samplers().size() == 2);
  dev->draw(prog, {{"u_a", &ta}, {"u_b", &tb}}, out, "mul_add");

  std::vector<float> got(static_cast<size_t>(full.numel));
  dev->download(out, got.data(), full.numel);
  for (int64_t i = 0; i < n; ++i) {
    // Separate multiply and add in float (volatile stops the host compiler contracting to an FMA); the
    // shader compiler may fuse, so the single-rounding fma result is accepted too.
    const float x = a[static_cast<size_t>(i)], y = b[static_cast<size_t>(i)];
    volatile float prod = x * y;
    const float expect = prod + 1.0f;
    const float expect_fma = std::fma(x, y, 1.0f);
    const float g = got[static_cast<size_t>(i)];
    INFO("element " << i << " got " << g << " expected " << expect);
    REQUIRE((same_bits(g, expect) || same_bits(g, expect_fma)));
  }
  // Upload zero-pads the inputs and the draw covers every texel: padding computes 0*0+1.
  for (int64_t i = n; i < full.numel; ++i) {
    INFO("padding element " << i);
    REQUIRE(got[static_cast<size_t>(i)] == 1.0f);
  }
}

TEST_CASE("GLES draw validates sampler bindings", "[gles]") {
  auto dev = make_device();
  Texture a = dev->create_texture(8, "a"), b = dev->create_texture(8, "b"), out = dev->create_texture(8, "out");
  auto prog = dev->create_program(kMulAddShader, "mul_add");
  // Missing sampler, unknown name, feedback loop.
  CHECK_THROWS_AS(dev->draw(prog, {{"u_a", &a}}, out, "mul_add"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, {{"u_a", &a}, {"u_b", &b}, {"u_typo", &b}}, out, "mul_add"),
                    Catch::Contains("u_typo") && Catch::Contains("mul_add"));
  CHECK_THROWS_AS(dev->draw(prog, {{"u_a", &a}, {"u_b", &out}}, out, "mul_add"), sg::ValueError);

  // A declared but unused sampler is optimised out by the compiler and silently skipped.
  const char* unused = R"(#version 300 es
precision highp float;
uniform highp sampler2D u_a;
uniform highp sampler2D u_unused;
out vec4 o_color;
void main() { o_color = texelFetch(u_a, ivec2(gl_FragCoord.xy), 0) + 2.0; }
)";
  // (what the source declares, as the toolchain reflects it for generated kernels)
  auto p2 = dev->create_program(unused, "unused_sampler", sg::ShaderInterface{{"u_a", "u_unused"}, 1});
  const float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  dev->upload(a, in, 8);
  dev->draw(p2, {{"u_a", &a}, {"u_unused", &b}}, out, "unused_sampler");
  float r[8];
  dev->download(out, r, 8);
  for (int i = 0; i < 8; ++i) CHECK(r[i] == in[i] + 2.0f);
}

TEST_CASE("GLES shader syntax error gives CompileError with marked line", "[gles]") {
  auto dev = make_device();
  const std::string bad = "#version 300 es\n"
                          "precision highp float;\n"
                          "out vec4 o_color;\n"
                          "void main() {\n"
                          "  o_color = vec4(1.0) +* 2.0;\n"
                          "}\n";
  try {
    dev->create_program(bad, "broken_kernel");
    FAIL("expected sg::CompileError");
  } catch (const sg::CompileError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("broken_kernel") != std::string::npos);
    CHECK(msg.find(">>    5 |   o_color = vec4(1.0) +* 2.0;") != std::string::npos);
    CHECK(msg.find("      1 | #version 300 es") != std::string::npos);
  }
  CHECK(dev->live_objects().programs == 0);
}

TEST_CASE("GLES live object counts return to baseline after 1000 cycles", "[gles]") {
  auto dev = make_device();
  auto prog = dev->create_program(R"(#version 300 es
precision highp float;
uniform highp sampler2D u_a;
out vec4 o_color;
void main() { o_color = texelFetch(u_a, ivec2(gl_FragCoord.xy), 0) * 3.0; }
)",
                                  "triple");
  Texture input = dev->create_texture(64, "in");
  std::vector<float> host(64);
  for (int i = 0; i < 64; ++i) host[static_cast<size_t>(i)] = static_cast<float>(i);
  dev->upload(input, host.data(), 64);
  const sg::gles::LiveObjects base = dev->live_objects();
  CHECK(base.textures == 1);
  CHECK(base.framebuffers == 1);
  CHECK(base.programs == 1);
  for (int i = 0; i < 1000; ++i) {
    Texture t = dev->create_texture(64 + i % 7, "cycle");
    sg::gles::Framebuffer extra = dev->create_framebuffer(t, "cycle");
    dev->draw(prog, {{"u_a", &input}}, t, "triple");
    if (i % 250 == 0) {
      float v[4];
      dev->download(t, v, 4);
      CHECK(v[3] == 9.0f);
    }
    auto now = dev->live_objects();
    REQUIRE(now.textures == base.textures + 1);
    REQUIRE(now.framebuffers == base.framebuffers + 2);
  }
  CHECK(dev->live_objects() == base);
  prog = sg::gles::Program();
  input = Texture();
  CHECK(dev->live_objects() == sg::gles::LiveObjects{});
}

TEST_CASE("GLES handles may outlive the device object", "[gles]") {
  Texture t;
  {
    auto dev = make_device();
    t = dev->create_texture(10, "survivor");
  }
  CHECK(t.valid());
  t = Texture();  // deletes the GL texture, then the context goes
  CHECK_FALSE(t.valid());
}

TEST_CASE("GLES profiling yields a measurement", "[gles]") {
  // Not a timing test: only that the mechanism returns a finite non-negative number.
  auto dev = make_device();
  Texture a = dev->create_texture(16, "a"), out = dev->create_texture(16, "out");
  auto prog = dev->create_program(R"(#version 300 es
precision highp float;
uniform highp sampler2D u_a;
out vec4 o_color;
void main() { o_color = texelFetch(u_a, ivec2(gl_FragCoord.xy), 0); }
)",
                                  "copy");
  CHECK(std::isnan(dev->last_draw_ms()));
  dev->set_profiling(true);
  dev->draw(prog, {{"u_a", &a}}, out, "copy");
  const double ms = dev->last_draw_ms();
  CHECK(std::isfinite(ms));
  CHECK(ms >= 0.0);
  dev->begin_timer();
  CHECK_THROWS_AS(dev->begin_timer(), sg::ValueError);
  auto r = dev->end_timer();
  CHECK(r.gpu() == dev->timer_queries_available());
  CHECK(r.ns() >= 0);
}

// ---------------------------------------------------------------------------------------------------------
// Multiple render targets (one draw, several output textures)
// ---------------------------------------------------------------------------------------------------------

namespace {

// out0 = a + b, out1 = a * b, out2 = a - b: single IEEE operations, so the CPU's float results are exact.
const char* kSumProdDiffShader = R"(#version 300 es
precision highp float;
precision highp sampler2D;
uniform highp sampler2D u_a;
uniform highp sampler2D u_b;
// Three colour outputs, one per draw buffer; a commented-out declaration must not count:
// layout(location = 5) out vec4 o_ignored;
/* layout(location = 6) out vec4 o_ignored2; */
layout(location = 0) out vec4 o_sum;
layout(location = 1) out highp vec4 o_prod;
layout(location = 2) out vec4 o_diff;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  vec4 a = texelFetch(u_a, p, 0);
  vec4 b = texelFetch(u_b, p, 0);
  o_sum = a + b;
  o_prod = a * b;
  o_diff = a - b;
}
)";
/// What kSumProdDiffShader declares (the commented-out outputs do not count).
const sg::ShaderInterface kSumProdDiffInterface{{"u_a", "u_b"}, 3};

// out0 = a + b, out1 = a - b.
const char* kSumDiffShader = R"(#version 300 es
precision highp float;
uniform highp sampler2D u_a;
uniform highp sampler2D u_b;
layout(location = 0) out vec4 o_sum;
layout(location = 1) out vec4 o_diff;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  o_sum = texelFetch(u_a, p, 0) + texelFetch(u_b, p, 0);
  o_diff = texelFetch(u_a, p, 0) - texelFetch(u_b, p, 0);
}
)";

std::vector<float> download_all(Device& dev, const Texture& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  dev.download(t, v.data(), t.numel());
  return v;
}

/// Requires got[i] to equal f(i) bit for bit for every i < numel and 0 in the padding past it.
template <class F>
void require_values(const std::vector<float>& got, int64_t numel, const char* what, F f) {
  for (size_t i = 0; i < got.size(); ++i) {
    const float expect = static_cast<int64_t>(i) < numel ? f(i) : 0.0f;
    INFO(what << " element " << i << " got " << got[i] << " expected " << expect);
    REQUIRE(same_bits(got[i], expect));
  }
}

/// A layout with the physical shape of `numel` elements but sized to read back every texel, padding included.
TextureLayout full_layout(const Device& dev, int64_t numel) {
  TextureLayout l = dev.layout_for(numel);
  l.texels = l.width * l.height;
  l.numel = l.padded_floats();
  return l;
}

}  // namespace

TEST_CASE("GLES multiple render targets: one draw writes a+b, a*b, a-b", "[gles][mrt]") {
  DeviceOptions opts;
  opts.max_texture_width = 16;
  auto dev = make_device(opts);
  REQUIRE(dev->caps().max_draw_buffers >= 4);  // ES 3.0 minimum
  CHECK(dev->caps_json()["max_draw_buffers"].get<int64_t>() == dev->caps().max_draw_buffers);

  const int64_t n = 4 * 16 * 5 + 7;  // 327 elements: 5 full rows of 16 texels and a partly filled 6th
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  Texture ta = dev->create_texture(n, "a"), tb = dev->create_texture(n, "b");
  dev->upload(ta, a.data(), n);
  dev->upload(tb, b.data(), n);
  const TextureLayout full = full_layout(*dev, n);
  REQUIRE(full.height == 6);
  Texture sum = dev->create_texture(full, "sum"), prod = dev->create_texture(full, "prod"),
          diff = dev->create_texture(full, "diff");
  // Garbage in the outputs first, so a draw that skips an output cannot pass.
  std::vector<float> junk(static_cast<size_t>(full.numel), 12345.0f);
  for (Texture* t : {&sum, &prod, &diff}) dev->upload(*t, junk.data(), full.numel);

  auto prog = dev->create_program(kSumProdDiffShader, "sum_prod_diff", kSumProdDiffInterface);
  CHECK(prog.fragment_outputs() == 3);
  const auto before = dev->live_objects();
  dev->draw(prog, {{"u_a", &ta}, {"u_b", &tb}}, {&sum, &prod, &diff}, "sum_prod_diff");
  // The first MRT draw creates the device's scratch framebuffer, and only one.
  CHECK(dev->live_objects().framebuffers == before.framebuffers + 1);

  auto at = [](const std::vector<float>& v, size_t i) { return v[i]; };
  require_values(download_all(*dev, sum), n, "a+b", [&](size_t i) { return at(a, i) + at(b, i); });
  require_values(download_all(*dev, prod), n, "a*b", [&](size_t i) { return at(a, i) * at(b, i); });
  require_values(download_all(*dev, diff), n, "a-b", [&](size_t i) { return at(a, i) - at(b, i); });

  // Single-output draws afterwards use the texture's own framebuffer (one output of the last MRT draw
  // included) and must be unaffected by the scratch framebuffer's state.
  auto mul_add = dev->create_program(kMulAddShader, "mul_add", sg::ShaderInterface{{"u_a", "u_b"}, 1});
  CHECK(mul_add.fragment_outputs() == 1);
  Texture single = dev->create_texture(full, "single");
  dev->draw(mul_add, {{"u_a", &ta}, {"u_b", &tb}}, single, "mul_add");
  dev->draw(mul_add, {{"u_a", &tb}, {"u_b", &ta}}, sum, "mul_add");
  auto mul_add_ok = [](float g, float x, float y) {
    volatile float p = x * y;
    return same_bits(g, p + 1.0f) || same_bits(g, std::fma(x, y, 1.0f));
  };
  const auto s1 = download_all(*dev, single), s2 = download_all(*dev, sum);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    INFO("element " << i);
    REQUIRE(mul_add_ok(s1[k], a[k], b[k]));
    REQUIRE(mul_add_ok(s2[k], b[k], a[k]));
  }
  // prod and diff were not touched by the single-output draws.
  require_values(download_all(*dev, prod), n, "a*b after", [&](size_t i) { return at(a, i) * at(b, i); });
  require_values(download_all(*dev, diff), n, "a-b after", [&](size_t i) { return at(a, i) - at(b, i); });
  // The same overload with one output is the single-output draw.
  Texture one = dev->create_texture(full, "one");
  const auto fbos = dev->live_objects().framebuffers;
  dev->draw(mul_add, {{"u_a", &ta}, {"u_b", &tb}}, llvm::ArrayRef<Texture*>{&one}, "mul_add");
  CHECK(dev->live_objects().framebuffers == fbos);
  CHECK(download_all(*dev, one) == s1);
}

TEST_CASE("GLES multiple render targets: ping-pong between target sets stays exact", "[gles][mrt]") {
  DeviceOptions opts;
  opts.max_texture_width = 8;
  auto dev = make_device(opts);
  const int64_t n = 4 * 8 * 7 + 2;  // 226 elements on 8 rows
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 37) - 3.0f;
    y[static_cast<size_t>(i)] = 1.5f - 0.125f * static_cast<float>(i % 11);
  }
  const TextureLayout full = full_layout(*dev, n);
  Texture p0 = dev->create_texture(full, "p0"), p1 = dev->create_texture(full, "p1");
  Texture q0 = dev->create_texture(full, "q0"), q1 = dev->create_texture(full, "q1");
  Texture r0 = dev->create_texture(full, "r0"), r1 = dev->create_texture(full, "r1"),
          r2 = dev->create_texture(full, "r2");
  dev->upload(p0, x.data(), n);
  dev->upload(p1, y.data(), n);
  auto sd = dev->create_program(kSumDiffShader, "sum_diff");
  auto spd = dev->create_program(kSumProdDiffShader, "sum_prod_diff", kSumProdDiffInterface);

  // CPU state follows the same steps in float.
  std::vector<float> cx = x, cy = y;
  Texture* cur[2] = {&p0, &p1};
  Texture* nxt[2] = {&q0, &q1};
  for (int step = 0; step < 12; ++step) {
    CAPTURE(step);
    if (step % 3 == 2) {
      // Three outputs (slots 0..2 attached), then a two-output draw that reads r2 and r0: slot 2 must have
      // been detached, or r2 would be both attached to the draw framebuffer and sampled.
      dev->draw(spd, {{"u_a", cur[0]}, {"u_b", cur[1]}}, {&r0, &r1, &r2}, "sum_prod_diff");
      dev->draw(sd, {{"u_a", &r2}, {"u_b", &r0}}, {nxt[0], nxt[1]}, "sum_diff");
      for (size_t i = 0; i < cx.size(); ++i) {
        const float s = cx[i] + cy[i], d = cx[i] - cy[i];
        cx[i] = d + s;
        cy[i] = d - s;
      }
    } else {
      dev->draw(sd, {{"u_a", cur[0]}, {"u_b", cur[1]}}, {nxt[0], nxt[1]}, "sum_diff");
      for (size_t i = 0; i < cx.size(); ++i) {
        const float s = cx[i] + cy[i], d = cx[i] - cy[i];
        cx[i] = s;
        cy[i] = d;
      }
    }
    std::swap(cur, nxt);
    if (step % 4 == 3 || step == 11) {
      require_values(download_all(*dev, *cur[0]), n, "x", [&](size_t i) { return cx[i]; });
      require_values(download_all(*dev, *cur[1]), n, "y", [&](size_t i) { return cy[i]; });
    }
  }

  // A deleted output's GL name may be handed to a new texture: the next MRT draw must attach the new one.
  // (Mesa does not reuse names soon, NVIDIA does: there an "already attached" cache by GL id made the
  // scratch-framebuffer loop below fail with an incomplete framebuffer.)
  r1 = Texture();
  Texture fresh = dev->create_texture(full, "fresh");
  dev->draw(spd, {{"u_a", cur[0]}, {"u_b", cur[1]}}, {&r0, &fresh, &r2}, "sum_prod_diff");
  require_values(download_all(*dev, fresh), n, "x*y into a new texture", [&](size_t i) { return cx[i] * cy[i]; });
  require_values(download_all(*dev, r2), n, "x-y", [&](size_t i) { return cx[i] - cy[i]; });
}

TEST_CASE("GLES multiple render targets: invalid output sets are ValueErrors", "[gles][mrt]") {
  auto dev = make_device();
  Texture a = dev->create_texture(64, "a"), b = dev->create_texture(64, "b");
  Texture o0 = dev->create_texture(64, "o0"), o1 = dev->create_texture(64, "o1"), o2 = dev->create_texture(64, "o2");
  Texture wide = dev->create_texture(128, "wide");
  auto prog = dev->create_program(kSumProdDiffShader, "spd_kernel", kSumProdDiffInterface);
  const std::pair<std::string, const Texture*> in[] = {{"u_a", &a}, {"u_b", &b}};
  using Catch::Contains;

  CHECK_THROWS_AS(dev->draw(prog, in, llvm::ArrayRef<Texture*>(), "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, llvm::ArrayRef<Texture*>(), "spd_kernel"),
                    Contains("spd_kernel") && Contains("no output textures"));

  // More outputs than draw buffers (distinct, same-sized textures).
  std::vector<Texture> many;
  std::vector<Texture*> many_ptrs;
  for (int64_t j = 0; j <= dev->caps().max_draw_buffers; ++j) many.push_back(dev->create_texture(64, "many"));
  for (auto& t : many) many_ptrs.push_back(&t);
  CHECK_THROWS_AS(dev->draw(prog, in, many_ptrs, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, many_ptrs, "spd_kernel"),
                    Contains("spd_kernel") && Contains("exceed") && Contains("draw buffers"));

  CHECK_THROWS_AS(dev->draw(prog, in, {&o0, &wide, &o2}, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &wide, &o2}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("differ in size") && Contains("'wide'"));

  CHECK_THROWS_AS(dev->draw(prog, in, {&o0, &o1, &o0}, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &o1, &o0}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("same texture") && Contains("'o0'"));

  const std::pair<std::string, const Texture*> loop[] = {{"u_a", &a}, {"u_b", &o1}};
  CHECK_THROWS_AS(dev->draw(prog, loop, {&o0, &o1, &o2}, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, loop, {&o0, &o1, &o2}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("feedback loop") && Contains("u_b"));

  Texture empty;
  CHECK_THROWS_AS(dev->draw(prog, in, {&o0, &empty, &o2}, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &empty, &o2}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("output 1") && Contains("empty"));
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &o1, nullptr}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("output 2") && Contains("null"));
  auto other = make_device();
  Texture foreign = other->create_texture(64, "foreign");
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &o1, &foreign}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("another device"));

  // Fewer outputs than the shader declares would leave a location's result nowhere (and a texture
  // without a shader output would get undefined values).
  CHECK_THROWS_AS(dev->draw(prog, in, {&o0, &o1}, "spd_kernel"), sg::ValueError);
  CHECK_THROWS_WITH(dev->draw(prog, in, {&o0, &o1}, "spd_kernel"),
                    Contains("spd_kernel") && Contains("declares 3 outputs"));

  // Nothing was drawn by the refused calls, and a valid call still works afterwards.
  const float va[4] = {1, 2, 3, 4}, vb[4] = {10, 20, 30, 40};
  dev->upload(a, va, 4);
  dev->upload(b, vb, 4);
  dev->draw(prog, in, {&o0, &o1, &o2}, "spd_kernel");
  float r[4];
  dev->download(o1, r, 4);
  for (int i = 0; i < 4; ++i) CHECK(r[i] == va[i] * vb[i]);
}

TEST_CASE("GLES multiple render targets: one framebuffer per output set, reused, released with its textures",
          "[gles][mrt]") {
  {
    auto dev = make_device();
    auto prog = dev->create_program(kSumDiffShader, "sum_diff");
    Texture a = dev->create_texture(64, "a"), b = dev->create_texture(64, "b");
    std::vector<float> ha(64), hb(64);
    for (int i = 0; i < 64; ++i) {
      ha[static_cast<size_t>(i)] = static_cast<float>(i);
      hb[static_cast<size_t>(i)] = static_cast<float>(2 * i + 1);
    }
    dev->upload(a, ha.data(), 64);
    dev->upload(b, hb.data(), 64);
    const sg::gles::LiveObjects base = dev->live_objects();
    CHECK(base == sg::gles::LiveObjects{2, 1, 2});
    for (int i = 0; i < 300; ++i) {
      Texture s = dev->create_texture(64, "s"), d = dev->create_texture(64, "d");
      dev->draw(prog, {{"u_a", &a}, {"u_b", &b}}, {&s, &d}, "sum_diff");
      if (i % 100 == 0) {
        float vs[8], vd[8];
        dev->download(s, vs, 8);
        dev->download(d, vd, 8);
        for (size_t k = 0; k < 8; ++k) {
          CHECK(vs[k] == ha[k] + hb[k]);
          CHECK(vd[k] == ha[k] - hb[k]);
        }
      }
      auto now = dev->live_objects();
      REQUIRE(now.textures == base.textures + 2);
      REQUIRE(now.framebuffers == base.framebuffers + 2 + 1);  // two textures' own + the MRT one of {s, d}
    }
    // every MRT framebuffer went with its textures (GL reuses texture ids: none may outlive them)
    CHECK(dev->live_objects() == base);
    {
      Texture s = dev->create_texture(64, "s"), d = dev->create_texture(64, "d");
      for (int i = 0; i < 3; ++i) dev->draw(prog, {{"u_a", &a}, {"u_b", &b}}, {&s, &d}, "sum_diff");
      CHECK(dev->live_objects().framebuffers == base.framebuffers + 2 + 1);  // one for the set {s, d}, reused
      dev->draw(prog, {{"u_a", &a}, {"u_b", &b}}, {&d, &s}, "sum_diff");  // another slot order: another set
      CHECK(dev->live_objects().framebuffers == base.framebuffers + 2 + 2);
      float vs[8], vd[8];
      dev->download(d, vs, 8);  // d was render target 0 (the sum) of the last draw, s target 1
      dev->download(s, vd, 8);
      for (size_t k = 0; k < 8; ++k) {
        CHECK(vs[k] == ha[k] + hb[k]);
        CHECK(vd[k] == ha[k] - hb[k]);
      }
    }
    CHECK(dev->live_objects() == base);
    prog = sg::gles::Program();
    a = Texture();
    b = Texture();
    CHECK(dev->live_objects() == sg::gles::LiveObjects{0, 0, 0});
  }
  {
    // Textures attached to an MRT framebuffer may outlive the device that drew into them.
    Texture s, d;
    {
      auto dev = make_device();
      auto prog = dev->create_program(kSumDiffShader, "sum_diff");
      Texture a = dev->create_texture(16, "a"), b = dev->create_texture(16, "b");
      s = dev->create_texture(16, "s");
      d = dev->create_texture(16, "d");
      dev->draw(prog, {{"u_a", &a}, {"u_b", &b}}, {&s, &d}, "sum_diff");
      dev->finish();
    }
    CHECK(s.valid());
    s = Texture();
    d = Texture();
    CHECK_FALSE(d.valid());
  }
}

TEST_CASE("GLES multiple render targets are profiled like single draws", "[gles][mrt]") {
  // Not a timing test: only that an MRT draw yields a finite non-negative measurement.
  auto dev = make_device();
  Texture a = dev->create_texture(16, "a"), b = dev->create_texture(16, "b");
  Texture s = dev->create_texture(16, "s"), d = dev->create_texture(16, "d");
  auto prog = dev->create_program(kSumDiffShader, "sum_diff");
  dev->set_profiling(true);
  CHECK(std::isnan(dev->last_draw_ms()));
  dev->draw(prog, {{"u_a", &a}, {"u_b", &b}}, {&s, &d}, "sum_diff");
  const double ms = dev->last_draw_ms();
  CHECK(std::isfinite(ms));
  CHECK(ms >= 0.0);
}
