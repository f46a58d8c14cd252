// Tests for sg/debug.h: captured PNGs decode with the documented colours, stats equal values computed directly,
// check_numerics names the user's source line, a scripted debugger session gives the expected transcript, the
// gradient-flow plot, and report.html loads in real headless Chromium (tests/debug_report_check.mjs).
//
// The Chromium test needs Debian's `chromium` (scripts/setup.sh installs it) and npm `playwright-core`
// (tests/package.json): when tests/node_modules is missing the test runs `npm ci --no-audit --no-fund` in tests/
// (falling back to `npm install --no-audit --no-fund`). A missing chromium fails the test, naming the package.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/cpu_reference.h"
#include "sg/debug.h"
#include "sg/nn.h"
#include "sg/emit.h"
#include "sg/image.h"
#include "sg/shader_compiler.h"

namespace Catch {
template <>
struct StringMaker<sg::image::RGB> {
  static std::string convert(const sg::image::RGB& c) {
    return "(" + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ")";
  }
};
}  // namespace Catch

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using sg::image::RGB;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sg_test_debug_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

std::string source_dir() {
  if (const char* e = std::getenv("SG_SOURCE_DIR")) return e;
  return SG_SOURCE_DIR;
}

/// Runs a shell command, returning its exit status and (in `output`) its stdout + stderr.
int shell(const std::string& cmd, std::string& output) {
  TempDir d;
  std::string log = (d.path / "out.txt").string();
  int rc = std::system((cmd + " > '" + log + "' 2>&1").c_str());
  std::ifstream f(log);
  output.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::unique_ptr<sg::Backend> backend(const std::string& kind, bool unfused = false) {
  sg::BackendOptions o;
  o.kind = kind;
  o.unfused = unfused;
  return sg::make_backend(o).backend;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

/// A tiny train step: loss = sum(x * w), w a 2x2 parameter; d(loss)/dw = x.
struct Tiny {
  sg::Tensor x = sg::input("x", {2, 2});
  sg::Tensor w = sg::param("w", {2, 2}, {1, 2, 3, 4});
  sg::Tensor y = x * w;
  sg::Tensor loss = sg::sum(y);
  std::unique_ptr<sg::Optimizer> opt = sg::make_sgd({.lr = 0.5});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt);
};

const sg::debug::Capture& capture_of(const sg::debug::Session& s, const sg::Node* n, int step = -1) {
  const sg::debug::Capture* c = s.find(s.node_number(n), step);
  REQUIRE(c != nullptr);
  return *c;
}

}  // namespace

TEST_CASE("compute_stats matches values computed by hand over the finite elements", "[debug]") {
  std::vector<float> v = {1, 2, 3, 4, kNaN, kInf, -kInf, 4};
  sg::debug::TensorStats s = sg::debug::compute_stats(v.data(), sg::Shape{2, 4});
  // Finite elements 1, 2, 3, 4, 4: mean 14/5, population variance ((1.8^2 + 0.8^2 + 0.2^2 + 1.2^2 * 2) / 5).
  CHECK(s.numel == 8);
  CHECK(s.nan == 1);
  CHECK(s.posinf == 1);
  CHECK(s.neginf == 1);
  CHECK(s.min == 1);
  CHECK(s.max == 4);
  CHECK(s.mean == Approx(2.8).epsilon(1e-12));
  CHECK(s.std == Approx(std::sqrt((1.8 * 1.8 + 0.8 * 0.8 + 0.2 * 0.2 + 2 * 1.2 * 1.2) / 5)).epsilon(1e-12));
  CHECK(s.l2 == Approx(std::sqrt(1 + 4 + 9 + 16 + 16.0)).epsilon(1e-12));
  CHECK(s.str() == "min 1 max 4 mean 2.8 std 1.16619 l2 6.78233 nan 1 +inf 1 -inf 1");
  std::vector<float> bad = {kNaN, kNaN};
  sg::debug::TensorStats b = sg::debug::compute_stats(bad.data(), sg::Shape{2});
  CHECK(std::isnan(b.mean));
  CHECK(b.nan == 2);
  CHECK(b.to_json()["mean"] == "nan");
}

TEST_CASE("captured values and gradients: stats equal direct computation and PNGs decode with documented colours",
          "[debug][gles]") {
  for (std::string kind : {"cpu", "gles"}) {
    INFO("backend " << kind);
    TempDir dir;
    Tiny t;
    auto be = backend(kind, /*unfused=*/true);  // one kernel per node: y = x * w is stored on GLES too
    auto exe = be->compile(t.ts.program);
    sg::debug::Session s({.out_dir = dir.str()});
    s.attach(*exe, t.ts, be.get());
    CHECK(s.role(t.y.node().get()) == sg::debug::Role::Forward);
    CHECK(s.role(t.ts.param_grads[0].node().get()) == sg::debug::Role::Backward);

    // Step 0: x = 0, so y = 0 and d(loss)/dw = x = 0 (an all-zero gradient: white in the diverging map).
    std::vector<float> zeros(4, 0.f);
    auto out = s.run({{"x", &zeros}});
    REQUIRE(out.size() == 2);  // loss, grad:w
    CHECK(out[0][0] == 0.f);
    const sg::debug::Capture& g = capture_of(s, t.ts.param_grads[0].node().get(), 0);
    CHECK(g.grad_of == "w");
    CHECK(g.stats.l2 == 0);
    REQUIRE(!g.png.empty());
    sg::image::RGBImage gi = sg::image::read_png((dir.path / g.png).string());
    // 2x2 tensor: upscaled by 256 / 2 = 128 (docs/COLORMAPS.md), legend below the 256x256 grid.
    CHECK(gi.width == 256);
    CHECK(gi.height > 256 + 10);
    for (int y = 0; y < 256; y += 17)
      for (int x = 0; x < 256; x += 17) REQUIRE(gi.at(x, y) == (RGB{255, 255, 255}));

    // Step 1: x holds a NaN at [0, 0]: y[0, 0] = NaN -> magenta marker; the other (zero) values take viridis' lowest
    // colour (Auto picks viridis: no finite value is negative).
    std::vector<float> xn = {kNaN, 0, 0, 0};
    s.run({{"x", &xn}});
    const sg::debug::Capture& yc = capture_of(s, t.y.node().get(), 1);
    CHECK(yc.stats.nan == 1);
    sg::image::RGBImage yi = sg::image::read_png((dir.path / yc.png).string());
    CHECK(yi.width == 256);
    CHECK(yi.at(10, 10) == sg::image::kNaNColor);
    CHECK(yi.at(127, 127) == sg::image::kNaNColor);
    CHECK(yi.at(129, 10) == (RGB{68, 1, 84}));
    CHECK(yi.at(200, 200) == (RGB{68, 1, 84}));

    // Step 2: known values; stats of y = x * w and of the gradient (= x) against direct computation. The SGD step 1
    // saw a NaN gradient, so reset w first through the backend.
    be->write(t.w, {1, 2, 3, 4});
    std::vector<float> xv = {-3, 0.5f, 2, 8};
    s.run({{"x", &xv}});
    std::vector<double> yv = {-3 * 1, 0.5 * 2, 2 * 3, 8 * 4};
    double mean = (yv[0] + yv[1] + yv[2] + yv[3]) / 4, var = 0, sq = 0;
    for (double v : yv) var += (v - mean) * (v - mean) / 4, sq += v * v;
    const sg::debug::Capture& y2 = capture_of(s, t.y.node().get(), 2);
    CHECK(y2.stats.min == -3);
    CHECK(y2.stats.max == 32);
    CHECK(y2.stats.mean == Approx(mean));
    CHECK(y2.stats.std == Approx(std::sqrt(var)));
    CHECK(y2.stats.l2 == Approx(std::sqrt(sq)));
    sg::image::RGBImage y2i = sg::image::read_png((dir.path / y2.png).string());
    // Diverging (a negative value): s = 32, -3 -> light blue side, 32 -> the red end (202, 0, 32).
    CHECK(y2i.at(200, 200) == (RGB{202, 0, 32}));
    CHECK(y2i.at(10, 10).b > y2i.at(10, 10).r);
    auto norms = s.gradient_norms();
    REQUIRE(norms.size() == 1);
    REQUIRE(norms[0].l2.size() == 3);
    CHECK(norms[0].computed == std::vector<bool>{true, true, true});  // a NaN norm is not a missing one
    CHECK(norms[0].l2[0] == 0);
    CHECK(std::isnan(norms[0].l2[1]));  // a gradient holding a NaN has no finite norm
    CHECK(norms[0].l2[2] == Approx(std::sqrt(9 + 0.25 + 4 + 64.0)));
    // The parameter value recorded at the start of step 2 is what write() set.
    const sg::debug::Capture& wc = capture_of(s, t.w.node().get(), 2);
    CHECK(wc.stats.l2 == Approx(std::sqrt(1 + 4 + 9 + 16.0)));
  }
}

TEST_CASE("check_numerics stops at the first launch producing NaN and names the user's source line", "[debug][gles]") {
  for (std::string kind : {"cpu", "gles"}) {
    INFO("backend " << kind);
    sg::Tensor x = sg::input("x", {4});
    sg::Tensor w = sg::param("w", {4}, {1, 1, 1, 1});
    sg::Tensor xw = x * w;
    const int log_line = __LINE__ + 1;
    sg::Tensor y = sg::log(xw);
    sg::Tensor loss = sg::sum(y);
    auto opt = sg::make_sgd({.lr = 0.1});
    sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt);
    auto be = backend(kind);
    auto exe = be->compile(ts.program);
    sg::debug::Session s({.check_numerics = true});
    s.attach(*exe, ts, be.get());
    std::vector<float> good = {1, 2, 3, 4};
    auto out = s.run({{"x", &good}});
    CHECK(out[0][0] == Approx(std::log(24.0)));
    std::vector<float> bad = {1, -2, 3, 4};  // log(-2) = NaN
    std::string line = "test_debug.cpp:" + std::to_string(log_line);
    try {
      s.run({{"x", &bad}});
      FAIL("check_numerics did not throw");
    } catch (const sg::debug::NumericsError& e) {
      std::string m = e.what();
      INFO(m);
      CHECK_THAT(m, Contains("step 1"));
      CHECK_THAT(m, Contains("1 NaN"));
      CHECK_THAT(m, Contains(e.kernel));
      CHECK(!e.kernel.empty());
      // The first non-finite node is the log, at the line above (re-evaluated on the CPU reference).
      CHECK_THAT(m, Contains("first non-finite node"));
      CHECK_THAT(m, Contains("map[log(a0)]"));
      CHECK_THAT(m, Contains(line));
      CHECK(std::find(e.sources.begin(), e.sources.end(), line) != e.sources.end());
      // It stopped at that launch: the loss (a later launch on the CPU, or the same fused kernel on GLES) is not
      // recorded for the failed step.
      CHECK((s.find(s.node_number(loss.node().get()), 1) == nullptr || kind == "gles"));
    }
    // An input that already holds a NaN is blamed on the data, before any kernel runs.
    std::vector<float> nan_in = {1, kNaN, 3, 4};
    CHECK_THROWS_WITH(s.run({{"x", &nan_in}}), Contains("input 'x'") && Contains("before any kernel ran"));
  }
}

TEST_CASE("attach refuses an executable of another program and capture filters select launches", "[debug][gles]") {
  Tiny a, b;
  auto be = backend("gles");
  auto exe_b = be->compile(b.ts.program);
  sg::debug::Session s;
  CHECK_THROWS_WITH(s.attach(*exe_b, a.ts, be.get()), Contains("not compiled from this program"));
  CHECK_THROWS_WITH(s.run({}), Contains("no executable attached"));

  TempDir dir;
  sg::debug::Session only({.out_dir = dir.str(), .capture = {"gradients"}});
  only.attach(*exe_b, b.ts, be.get());
  std::vector<float> xv = {1, 2, 3, 4};
  only.run({{"x", &xv}});
  REQUIRE(only.captures().size() == 1);  // the gradient launch only: no leaves, no forward/update launches
  CHECK(only.captures()[0].grad_of == "w");
  CHECK(only.captures()[0].stats.l2 == Approx(std::sqrt(30.0)));
  CHECK(fs::exists(dir.path / only.captures()[0].png));

  sg::debug::Session unknown({.capture = {"k99_nothing"}});
  CHECK_THROWS_WITH(unknown.attach(*exe_b, b.ts, be.get()), Contains("matches nothing"));
}

TEST_CASE("plot_series draws each series in its palette colour inside the axes", "[debug]") {
  using sg::debug::Series;
  std::vector<Series> ss = {{"a.weight", {1e-3, 1e-2, 1e-1}, std::nullopt}, {"b.bias", {1, 1, 1}, std::nullopt}};
  sg::image::RGBImage img = sg::debug::plot_series(ss, {.width = 400, .height = 300, .title = "t"});
  CHECK(img.width == 400);
  CHECK(img.height == 300);
  auto count = [&](RGB c) {
    int n = 0;
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x) n += img.at(x, y) == c;
    return n;
  };
  CHECK(count(sg::debug::palette_color(0)) > 50);
  CHECK(count(sg::debug::palette_color(1)) > 50);
  CHECK(count(sg::debug::palette_color(2)) == 0);
  // The constant series at 1e0 lies on the top decade line (range 1e-3..1e0, log scale): its pixels share one row
  // band, and that band is above the first series' first point.
  int top1 = img.height, top0 = img.height, bottom0 = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < 300; ++x) {
      if (img.at(x, y) == sg::debug::palette_color(1)) top1 = std::min(top1, y);
      if (img.at(x, y) == sg::debug::palette_color(0)) top0 = std::min(top0, y), bottom0 = std::max(bottom0, y);
    }
  CHECK(top1 <= top0 + 3);
  CHECK(bottom0 - top0 > 140);  // two of the three decades: about 2/3 of the 218-px plot height
  CHECK_THROWS_AS(sg::debug::plot_series(ss, {.width = 100, .height = 100}), sg::ValueError);
}

TEST_CASE("a scripted debugger session gives the expected transcript", "[debug][repl]") {
  // loss = sum(x * w) with x = (3, 4), w = (1, -2): y = (3, -8), loss = -5; d(loss)/dw = x = (3, 4) (l2 5);
  // SGD lr 0.5: w' = w - 0.5 x = (-0.5, -4); step 1: y = (-1.5, -16), loss = -17.5.
  const int line = __LINE__;
  sg::Tensor x = sg::input("x", {2});
  sg::Tensor w = sg::param("w", {2}, {1, -2});  // line + 2
  sg::Tensor y = x * w;                          // line + 3
  sg::Tensor loss = sg::sum(y);                  // line + 4
  auto opt = sg::make_sgd({.lr = 0.5});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt, {}, /*output_grads=*/false);
  auto be = backend("cpu");
  auto exe = be->compile(ts.program);
  TempDir dir;
  sg::debug::Session s({.out_dir = dir.str()});
  s.attach(*exe, ts, be.get());
  std::istringstream in(
      "list\nprint w\nbreak n7\nbreak nope\nnext\nprint n2\nprint loss\nstep\nstep\nprint loss\ngrad w\ngrad n2\nfly\n"
      "print zz\nshow n2\ncontinue\ngrad w\nbreak\ncontinue\nprint w\nprint n2\nnext\nprint loss\nquit\n");
  std::ostringstream out;
  s.set_debugger(in, out);
  std::vector<float> xv = {3, 4};
  for (int i = 0; i < 3 && !s.quit_requested(); ++i) s.run({{"x", &xv}});
  if (!s.quit_requested()) s.debugger_finish();
  CHECK(s.quit_requested());
  std::string got = replace_all(out.str(), dir.str(), "OUT");
  // Node numbers are positions in Program::nodes(): n0 x, n1 w, n2 y, n3 loss, n4 the seed 1, n5 its reshape,
  // n6 d(loss)/dy (expand), n7 d(loss)/dw = x * n6, n8 the SGD update w - 0.5 * n7. Every number below is the
  // hand computation in the comment at the top of this test (mean/std/l2 of 2-element vectors).
  std::string expected = R"(shadergrad debugger: 6 launches per step (CPU backend: one per graph node); type `help` for the commands
[step 0] stopped before the first launch
(sgdb) list
6 launches per step (CPU backend: one per graph node):
=>    0 n002_map                 n2 map[(a0 * a1)]
      1 n003_sum                 n3 sum
      2 n005_reshape             n5 reshape
      3 n006_expand              n6 expand
      4 n007_map                 n7 map[(a0 * a1)]
      5 n008_map                 n8 map[(a0 - (a1 * 0.5))]
(sgdb) print w
n1 param 'w' (2) at test_debug.cpp:@W@ [param]
  min -2 max 1 mean -0.5 std 1.5 l2 2.23607 nan 0 +inf 0 -inf 0
  [1, -2]
(sgdb) break n7
breakpoint 1: after n007_map (computes n7)
(sgdb) break nope
no kernel or node 'nope': use a kernel name or its prefix (n002_map ... n008_map; `list`) or a node number (n0..n8)
(sgdb) next
[step 0] launch 0 of 6: n002_map computed n2 map[(a0 * a1)] (2) at test_debug.cpp:@Y@
  min -8 max 3 mean -2.5 std 5.5 l2 8.544 nan 0 +inf 0 -inf 0
(sgdb) print n2
n2 map[(a0 * a1)] (2) at test_debug.cpp:@Y@ [forward, stored by n002_map]
  min -8 max 3 mean -2.5 std 5.5 l2 8.544 nan 0 +inf 0 -inf 0
  [3, -8]
(sgdb) print loss
n3 sum (scalar) at test_debug.cpp:@L@ [forward, stored by n003_sum]
  not computed yet in step 0: n003_sum computes it (`break n3` then `continue`)
(sgdb) step
[step 0] n2 map[(a0 * a1)] (2) at test_debug.cpp:@Y@ [forward, stored by n002_map]
  min -8 max 3 mean -2.5 std 5.5 l2 8.544 nan 0 +inf 0 -inf 0
(sgdb) step
[step 0] n3 sum (scalar) at test_debug.cpp:@L@ [forward, stored by n003_sum]
  min -5 max -5 mean -5 std 0 l2 5 nan 0 +inf 0 -inf 0
(sgdb) print loss
n3 sum (scalar) at test_debug.cpp:@L@ [forward, stored by n003_sum]
  min -5 max -5 mean -5 std 0 l2 5 nan 0 +inf 0 -inf 0
  [-5]
(sgdb) grad w
d(loss)/d(w) = n7 map[(a0 * a1)] (2) at test_debug.cpp:@Y@ [backward, stored by n007_map, d(loss)/d(w)]
  not computed yet in step 0: n007_map computes it (`break n7` then `continue`)
(sgdb) grad n2
d(loss)/d(n2) = n6 expand (2) at test_debug.cpp:@L@ [backward, stored by n006_expand, d(loss)/d(n2)]
  not computed yet in step 0: n006_expand computes it (`break n6` then `continue`)
(sgdb) fly
unknown command 'fly' (type `help` for the list)
(sgdb) print zz
no tensor 'zz': use a node number (n0..n8), a kernel name (n002_map ... n008_map; `list`), or a name (loss, w, x)
(sgdb) show n2
wrote OUT/repl/step000_n002.png (256x162, colormap diverging, range -8 .. 8)
(sgdb) continue
breakpoint 1 hit
[step 0] launch 4 of 6: n007_map computed n7 map[(a0 * a1)] (2) at test_debug.cpp:@Y@
  min 3 max 4 mean 3.5 std 0.5 l2 5 nan 0 +inf 0 -inf 0
(sgdb) grad w
d(loss)/d(w) = n7 map[(a0 * a1)] (2) at test_debug.cpp:@Y@ [backward, stored by n007_map, d(loss)/d(w)]
  min 3 max 4 mean 3.5 std 0.5 l2 5 nan 0 +inf 0 -inf 0
  [3, 4]
(sgdb) break
breakpoint 1: n007_map
(sgdb) continue
[step 0] finished: loss = -5
breakpoint 1 hit
[step 1] launch 4 of 6: n007_map computed n7 map[(a0 * a1)] (2) at test_debug.cpp:@Y@
  min 3 max 4 mean 3.5 std 0.5 l2 5 nan 0 +inf 0 -inf 0
(sgdb) print w
n1 param 'w' (2) at test_debug.cpp:@W@ [param]
  min -4 max -0.5 mean -2.25 std 1.75 l2 4.03113 nan 0 +inf 0 -inf 0
  [-0.5, -4]
(sgdb) print n2
n2 map[(a0 * a1)] (2) at test_debug.cpp:@Y@ [forward, stored by n002_map]
  min -16 max -1.5 mean -8.75 std 7.25 l2 16.0702 nan 0 +inf 0 -inf 0
  [-1.5, -16]
(sgdb) next
[step 1] launch 5 of 6: n008_map computed n8 map[(a0 - (a1 * 0.5))] (2) at test_debug.cpp:@W@
  min -6 max -2 mean -4 std 2 l2 6.32456 nan 0 +inf 0 -inf 0
(sgdb) print loss
n3 sum (scalar) at test_debug.cpp:@L@ [forward, stored by n003_sum]
  min -17.5 max -17.5 mean -17.5 std 0 l2 17.5 nan 0 +inf 0 -inf 0
  [-17.5]
(sgdb) quit
)";
  expected = replace_all(expected, "@W@", std::to_string(line + 2));
  expected = replace_all(expected, "@Y@", std::to_string(line + 3));
  expected = replace_all(expected, "@L@", std::to_string(line + 4));
  CHECK(got == expected);
  if (got != expected) std::fputs(got.c_str(), stderr);
}

TEST_CASE("debugger on a fused GLES plan: step walks a kernel's nodes and shader prints its GLSL ES", "[debug][gles]") {
  sg::Tensor x = sg::input("x", {2, 3});
  sg::Tensor wt = sg::param("w", {3, 2}, {1, 0, 0, 1, 1, 1});
  sg::Tensor b = sg::param("b", {2}, {-1, 0.5f});
  sg::Tensor h = sg::relu(sg::matmul(x, wt) + b);
  sg::Tensor loss = sg::sum(h);
  auto opt = sg::make_sgd({.lr = 0.1});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", wt}, {"b", b}}, *opt);
  // one iteration domain per kernel, so that a multi-output kernel follows the fused one (with union-domain
  // kernels this whole step is 2 draws; the CLI debug tests run those)
  sg::BackendOptions bo;
  bo.kind = "gles";
  bo.union_domains = false;
  auto be = sg::make_backend(bo).backend;
  auto exe = be->compile(ts.program);
  const sg::Plan* plan = exe->plan();
  REQUIRE(plan != nullptr);
  size_t K = 0;  // the first fused kernel (matmul + bias add: the epilogue rule)
  while (K < plan->kernels.size() && plan->kernels[K].nodes.size() < 2) ++K;
  REQUIRE(K < plan->kernels.size());
  const sg::Kernel& k0 = plan->kernels[K];
  sg::debug::Session s;
  s.attach(*exe, ts, be.get());
  std::string script = "help\n";
  if (K > 0) script += "break " + plan->kernels[K - 1].name + "\ncontinue\n";
  // Stopped after k0: `step` walks its nodes in graph order (they are shown at once: k0 ran); then the next kernel.
  script += "next\n";
  for (size_t i = 0; i < k0.nodes.size(); ++i) script += "step\n";
  script += "next\nshader " + k0.name + "\nshader n999\nprint n999\ngrad\nquit\n";
  std::istringstream in(script);
  std::ostringstream out;
  s.set_debugger(in, out);
  std::vector<float> xv = {1, 2, 3, -1, -2, -3};
  s.run({{"x", &xv}});
  CHECK(s.quit_requested());
  std::string t = out.str();
  INFO(t);
  for (const char* cmd : {"next", "step", "continue", "break", "print", "show", "grad", "shader", "list", "help", "quit"})
    CHECK_THAT(t, Contains(std::string("  ") + cmd + " "));
  size_t n = k0.nodes.size();
  // the debugger lists one launch per stored value: a multi-output kernel counts once per output
  size_t before = 0, entries = 0;
  for (size_t i = 0; i < plan->kernels.size(); ++i) (i < K ? before : entries) += plan->kernels[i].outputs.size();
  entries += before;
  CHECK_THAT(t, Contains(fmt::format("launch {} of {}: {} (fused: {} nodes", before, entries, k0.name, n)));
  // `step` shows every node of k0 in graph order: the ones it kept in registers recomputed on the CPU reference
  // (Options::recompute) with their stats, the stored one with the stored value's stats.
  for (auto& node : k0.nodes) {
    const int k = s.node_number(node.get());
    const bool stored = node.get() == plan->values[k0.outputs[0]].node.get();
    INFO("n" << k);
    CHECK_THAT(t, Contains(fmt::format("[step 0] n{} ", k)));
    CHECK_THAT(t, Contains(stored ? fmt::format("stored by {}]", k0.name)
                                  : fmt::format("in {}: not stored; recomputed on the CPU reference]", k0.name)));
  }
  // Then the next kernel: a multi-output kernel is one stop covering all its entries (launches a-b).
  REQUIRE(K + 1 < plan->kernels.size());
  const size_t next = before + k0.outputs.size(), next_n = plan->kernels[K + 1].outputs.size();
  CHECK_THAT(t, Contains(next_n == 1 ? fmt::format("launch {} of {}: ", next, entries)
                                     : fmt::format("launches {}-{} of {}: {} (one draw, {} outputs", next,
                                                   next + next_n - 1, entries, plan->kernels[K + 1].name, next_n)));
  // The shader command prints the GLSL ES the toolchain makes of this kernel (computed here independently), with
  // the generated header comment naming the graph nodes carried over after the #version line.
  std::string gles = sg::compile_shader(k0.name, sg::emit_glsl450(*plan, k0, sg::ShaderStage::Fragment),
                                        sg::ShaderStage::Fragment).gles;
  CHECK_THAT(t, Contains(gles.substr(gles.find('\n') + 1)));
  CHECK_THAT(t, Contains("// graph nodes computed here"));
  CHECK_THAT(t, Contains("no kernel 'n999'"));
  CHECK_THAT(t, Contains("no node n999"));
  CHECK_THAT(t, Contains("grad needs an argument"));
  // Every generated kernel compiles as GLSL ES through glslang, header comments included.
  for (auto& [name, src] : s.shader_sources()) CHECK_NOTHROW(sg::check_gles_compiles(name, src, sg::ShaderStage::Fragment));
}

TEST_CASE("shadergrad debug run: report.html loads in headless Chromium and GLES matches the CPU backend",
          "[debug][gles][browser]") {
  TempDir gl_dir, cpu_dir;
  sg::debug::RunConfig cfg;
  cfg.model = "cnn";
  cfg.dataset = "digits";
  cfg.steps = 2;
  cfg.batch = 8;
  cfg.unfused = true;
  cfg.backend = "gles";
  cfg.out_dir = gl_dir.str();
  std::istringstream no_input;
  std::ostringstream log;
  sg::debug::RunResult r = sg::debug::run_debug(cfg, no_input, log);
  INFO(log.str());
  REQUIRE(r.steps == 2);
  CHECK(fs::exists(gl_dir.path / "report.html"));
  CHECK(fs::exists(gl_dir.path / "gradient_flow.png"));
  CHECK(fs::exists(gl_dir.path / "step001" / "param.0.weight.png"));
  std::ifstream sf(gl_dir.path / "stats.json");
  nlohmann::json stats = nlohmann::json::parse(sf);
  // unfused: one kernel per graph node, each node computed by one launch (the fused plan has 17 kernels)
  std::set<int> launched_nodes;
  for (auto& L : stats["launches"]) {
    CHECK(L["nodes"].size() == 1);
    for (auto& n : L["nodes"]) launched_nodes.insert(n.get<int>());
  }
  CHECK(launched_nodes.size() == stats["launches"].size());
  CHECK(stats["launches"].size() > 50);
  // Every captured image decodes with libpng (the browser below also shows them).
  int pngs = 0;
  for (auto& c : stats["captures"])
    if (!c["png"].get<std::string>().empty()) {
      sg::image::RGBImage img = sg::image::read_png((gl_dir.path / c["png"].get<std::string>()).string());
      CHECK(img.width >= 128);
      ++pngs;
    }
  CHECK(pngs == static_cast<int>(stats["captures"].size()));
  // Same run on the CPU reference backend (same seed: same init and batches): losses and every parameter's
  // gradient norm agree.
  cfg.backend = "cpu";
  cfg.out_dir = cpu_dir.str();
  std::ostringstream cpu_log;
  sg::debug::RunResult rc = sg::debug::run_debug(cfg, no_input, cpu_log);
  std::ifstream cf(cpu_dir.path / "stats.json");
  nlohmann::json cstats = nlohmann::json::parse(cf);
  for (int i = 0; i < 2; ++i) CHECK(r.losses[i] == Approx(rc.losses[i]).epsilon(1e-4));
  REQUIRE(stats["gradient_norms"].size() == 8);
  for (auto& [param, norms] : stats["gradient_norms"].items())
    for (int i = 0; i < 2; ++i) {
      INFO(param << " step " << i);
      REQUIRE(norms[i].is_number());
      CHECK(norms[i].get<double>() > 0);
      CHECK(norms[i].get<double>() == Approx(cstats["gradient_norms"][param][i].get<double>()).epsilon(1e-3));
    }

  // Real Chromium: no console errors, no requests leaving the page's loopback origin, every <img> decoded.
  if (!fs::exists("/usr/bin/chromium"))
    FAIL("/usr/bin/chromium is missing: install the Debian package 'chromium' (scripts/setup.sh installs it)");
  const std::string tests = source_dir() + "/tests";
  std::string npm_out;
  if (!fs::exists(tests + "/node_modules/playwright-core/package.json")) {
    int rc_npm = shell("cd '" + tests + "' && (npm ci --no-audit --no-fund || npm install --no-audit --no-fund)", npm_out);
    INFO(npm_out);
    REQUIRE(rc_npm == 0);
  }
  std::string browser_out;
  int rc_node = shell("node '" + tests + "/debug_report_check.mjs' '" + gl_dir.str() + "'", browser_out);
  INFO(browser_out);
  CHECK(rc_node == 0);
  nlohmann::json res = nlohmann::json::parse(browser_out.substr(browser_out.rfind("{\"title\"")), nullptr, false);
  REQUIRE(!res.is_discarded());
  CHECK(res["problems"].empty());
  CHECK(res["images"].get<int>() > 100);
  CHECK(res["broken"] == 0);
  CHECK(res["shaders"].get<int>() == static_cast<int>(stats["launches"].size()));
  // The graph view: nodes, gradient-coloured edges, a click showing value and gradient images, a non-blank picture.
  CHECK(res["graph"]["nodes"].get<int>() > 20);
  CHECK(res["graph"]["coloured"].get<int>() > 10);
  CHECK(res["clicked"]["decoded"] == 2);
  CHECK(res["screenshot_colours"].get<int>() >= 20);

  // The default teaching run is fused: its report gets every value too (recomputed ones marked), and the page
  // passes the same browser checks.
  TempDir fused_dir;
  cfg.model = "mlp";
  cfg.backend = "gles";
  cfg.unfused = false;
  cfg.steps = 1;
  cfg.out_dir = fused_dir.str();
  std::ostringstream fused_log;
  sg::debug::run_debug(cfg, no_input, fused_log);
  std::ifstream ff(fused_dir.path / "stats.json");
  nlohmann::json fstats = nlohmann::json::parse(ff);
  int recomputed = 0;
  for (auto& c : fstats["captures"]) recomputed += c.value("recomputed", false);
  CHECK(recomputed > 10);
  // Layer labels (Sequential::forward_layers): parameters by their name's prefix, forward nodes by creation.
  int labelled = 0;
  for (auto& n : fstats["nodes"]) {
    const std::string role = n["role"], layer = n.value("layer", "");
    INFO(n.dump());
    if (role == "param") CHECK(layer == (n["label"].get<std::string>().find("'1.") != std::string::npos
                                             ? "1: Linear(64, 128)" : "3: Linear(128, 10)"));
    if (n["op"] == "matmul" && role == "forward") CHECK_THAT(layer, Contains(": Linear("));
    if (n["op"] == "map" && n["label"] == "map[relu(a0)]" && role == "forward") CHECK(layer == "2: ReLU()");
    labelled += !layer.empty();
  }
  CHECK(labelled > 20);
  std::string fused_out;
  int rc_fused = shell("node '" + tests + "/debug_report_check.mjs' '" + fused_dir.str() + "'", fused_out);
  INFO(fused_out);
  CHECK(rc_fused == 0);
  // The CPU backend's report (launches are graph nodes; the panel shows the GLES kernel of the reference plan).
  std::string cpu_out;
  int rc_cpu = shell("node '" + tests + "/debug_report_check.mjs' '" + cpu_dir.str() + "'", cpu_out);
  INFO(cpu_out);
  CHECK(rc_cpu == 0);
}

TEST_CASE("multi-output kernel (Adam's m, v and new parameter in one draw): debugger stops once, prints every output",
          "[debug][gles][mrt]") {
  // loss = sum(x * w), d(loss)/dw = x = g. Adam (lr 0.01, betas 0.9/0.999) step 1: m = 0.1 g, v = 0.001 g^2,
  // bias-corrected m^ = g, v^ = g^2, w' = w - 0.01 g / (|g| + 1e-8) = w - 0.01 sign(g).
  sg::Tensor x = sg::input("x", {4});
  sg::Tensor w = sg::param("w", {4}, {1, 2, 3, 4});
  sg::Tensor loss = sg::sum(x * w);
  auto opt = sg::make_adam({.lr = 0.01});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt);
  auto be = backend("gles");
  auto exe = be->compile(ts.program);
  const sg::Plan* plan = exe->plan();
  REQUIRE(plan != nullptr);
  // The new parameter value is computed by a kernel with several outputs (the multi-output fusion rule).
  const sg::Node* w_next = nullptr;
  for (auto& u : ts.program.updates)
    if (u.target == w.node()) w_next = u.value.get();
  REQUIRE(w_next != nullptr);
  const sg::Kernel* mk = nullptr;
  for (auto& k : plan->kernels)
    for (int o : k.outputs)
      if (plan->values[o].node.get() == w_next) mk = &k;
  REQUIRE(mk != nullptr);
  REQUIRE(mk->outputs.size() >= 3);  // at least m, v and w'

  sg::debug::Session s;
  s.attach(*exe, ts, be.get());
  // One launch entry per stored value, consecutive, named <kernel>.<value>, sharing the kernel.
  int first = -1;
  for (auto& L : s.launches())
    if (L.kernel == mk) {
      if (first < 0) first = L.index;
      CHECK(L.kernel_name == mk->name);
      CHECK(L.first == first);
      CHECK(L.index == first + L.output_index);
      CHECK(L.outputs == static_cast<int>(mk->outputs.size()));
      CHECK(L.name == mk->name + "." + plan->values[mk->outputs[L.output_index]].name);
      CHECK(L.output == plan->values[mk->outputs[L.output_index]].node.get());
    }
  REQUIRE(first >= 0);
  const std::string wlaunch = [&] {
    for (auto& L : s.launches())
      if (L.output == w_next) return L.name;
    return std::string();
  }();
  // The full kernel name (as in plan.json, dumps and the profile table) is accepted by break, print and shader;
  // a launch name by shader.
  std::istringstream in("break " + mk->name + "\nbreak " + wlaunch + "\ncontinue\nprint " + mk->name + "\nprint " +
                        wlaunch + "\nshader " + wlaunch + "\nlist\nquit\n");
  std::ostringstream out;
  s.set_debugger(in, out);
  std::vector<float> xv = {3, -4, 0.5f, 2};
  s.run({{"x", &xv}});
  std::string t = out.str();
  INFO(t);
  const int last = first + static_cast<int>(mk->outputs.size()) - 1;
  CHECK_THAT(t, Contains(fmt::format("breakpoint 1: after {} (computes", mk->name)));
  CHECK_THAT(t, Contains(fmt::format("breakpoint 1 already stops after {}", mk->name)));
  CHECK_THAT(t, Contains(fmt::format("[step 0] launches {}-{} of {}: {} (one draw, {} outputs", first, last,
                                     s.launches().size(), mk->name, mk->outputs.size())));
  CHECK_THAT(t, !Contains("not computed yet"));  // every output was read back before the stop
  // Values stored by the kernel, against the hand computation above.
  const std::vector<double> g = {3, -4, 0.5, 2};
  std::vector<double> m, v, wn;
  for (size_t i = 0; i < 4; ++i) {
    m.push_back(0.1 * g[i]);
    v.push_back(0.001 * g[i] * g[i]);
    wn.push_back((i + 1.0) - 0.01 * (g[i] > 0 ? 1 : -1));
  }
  const sg::Node* m_node = nullptr;
  const sg::Node* v_node = nullptr;
  for (auto& u : ts.program.updates) {
    if (u.target->name == "w.exp_avg") m_node = u.value.get();
    if (u.target->name == "w.exp_avg_sq") v_node = u.value.get();
  }
  REQUIRE(m_node != nullptr);
  REQUIRE(v_node != nullptr);
  for (auto [node, want] : {std::pair{m_node, m}, std::pair{v_node, v}, std::pair{w_next, wn}}) {
    const std::vector<float>* got = s.value(node);
    REQUIRE(got != nullptr);
    REQUIRE(got->size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK((*got)[i] == Approx(want[i]).epsilon(1e-5));
    // The stop printed this output's stats, and `print KERNEL` its values (formatted as {:.6g}).
    int k = s.node_number(node);
    CHECK_THAT(t, Contains(fmt::format("  n{} (output ", k)));
    // `print KERNEL` printed "nK ..." then "  [a, b, c, d]": parse the numbers back.
    size_t at = t.find(fmt::format("\nn{} ", k));
    REQUIRE(at != std::string::npos);
    size_t lb = t.find("  [", at), rb = t.find(']', lb);
    REQUIRE(rb != std::string::npos);
    std::vector<double> printed;
    std::istringstream ps(replace_all(t.substr(lb + 3, rb - lb - 3), ",", " "));
    for (double d; ps >> d;) printed.push_back(d);
    REQUIRE(printed.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(printed[i] == Approx(want[i]).epsilon(1e-5));
  }
  CHECK_THAT(t, Contains(fmt::format("stored by {} (output ", wlaunch)));
  CHECK_THAT(t, Contains(fmt::format("// {}: GLSL ES 3.00 fragment shader", mk->name)));
  CHECK_THAT(t, Contains(fmt::format("{} (one draw, {} outputs): ", mk->name, mk->outputs.size())));
}

TEST_CASE("check_numerics in a multi-output kernel names the failing output, its kernel and the node",
          "[debug][gles][mrt]") {
  // Adam with lr 1e39: the constant is +Inf in float, so the new parameter is w - Inf * sign(g) = -/+Inf, while
  // m and v (earlier outputs of the same draw) stay finite.
  sg::Tensor x = sg::input("x", {4});
  sg::Tensor w = sg::param("w", {4}, {1, 2, 3, 4});
  const int line = __LINE__ + 1;
  sg::Tensor loss = sg::sum(x * w);
  auto opt = sg::make_adam({.lr = 1e39});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt);
  auto be = backend("gles");
  auto exe = be->compile(ts.program);
  sg::debug::Session s({.check_numerics = true});
  s.attach(*exe, ts, be.get());
  const sg::Node* w_next = nullptr;
  for (auto& u : ts.program.updates)
    if (u.target == w.node()) w_next = u.value.get();
  const sg::debug::Launch* wl = nullptr;
  for (auto& L : s.launches())
    if (L.output == w_next) wl = &L;
  REQUIRE(wl != nullptr);
  REQUIRE(wl->outputs > 1);
  std::vector<float> xv = {3, -4, 0.5f, 2};
  try {
    s.run({{"x", &xv}});
    FAIL("check_numerics did not throw");
  } catch (const sg::debug::NumericsError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(e.kernel == wl->name);
    // -Inf where g > 0 (w - Inf), +Inf where g < 0: 3 and 1.
    CHECK_THAT(msg, Contains(fmt::format("launch {} '{}' produced 0 NaN, 1 +Inf, 3 -Inf of 4 values", wl->index,
                                         wl->name)));
    CHECK_THAT(msg, Contains(fmt::format("it is output {} of {} of kernel {}", wl->output_index, wl->outputs,
                                         wl->kernel_name)));
    int k = s.node_number(w_next);
    CHECK_THAT(msg, Contains(fmt::format("first non-finite node (CPU reference re-evaluation from the kernel's "
                                         "inputs): n{} ", k)));
    CHECK_THAT(msg, Contains(fmt::format("(output {})", wl->output_index)));
    if (wl->output_index > 0)
      CHECK_THAT(msg, Contains(fmt::format("outputs 0..{} of the kernel are finite", wl->output_index - 1)));
    // The kernel's earlier outputs were read back and are finite.
    for (int i = wl->first; i < wl->index; ++i) {
      const std::vector<float>* val = s.value(s.launches()[i].output);
      REQUIRE(val != nullptr);
      for (float f : *val) CHECK(std::isfinite(f));
    }
    (void)line;
  }
}

// ---- classroom debugger: every node has a value, user source lines, image tiles, robust REPL ------------------

namespace {

/// A 2-layer MLP train step over a batch of 4 single-channel 6x6 "images" (the MNIST MLP's structure, small):
/// Flatten, Linear(36, 5), ReLU, Linear(5, 3); the layers are called and the loss built on the lines noted.
struct SmallMlp {
  sg::nn::Rng rng{7};
  sg::nn::Sequential net;
  sg::Tensor x = sg::input("x", {4, 1, 6, 6});
  sg::Tensor y = sg::input("labels", {4}, sg::DType::i32);
  sg::Tensor logits, loss;
  int build_line = 0, call_line = 0, loss_line = 0;
  std::unique_ptr<sg::Optimizer> opt = sg::make_adam({.lr = 1e-2});
  std::vector<float> xv = std::vector<float>(4 * 36), yv = {0, 2, 1, 2};
  SmallMlp() {
    net.add<sg::nn::Flatten>().add<sg::nn::Linear>(36, 5).add<sg::nn::ReLU>().add<sg::nn::Linear>(5, 3);
    build_line = __LINE__ + 1;
    net.build(rng);
    call_line = __LINE__ + 1;
    logits = net(x);
    loss_line = __LINE__ + 1;
    loss = sg::cross_entropy(logits, y);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  }
  sg::debug::TrainStep step() { return sg::debug::make_train_step(loss, net.named_parameters(), *opt); }
};

}  // namespace

TEST_CASE("fused GLES plan: every node has a value, recomputed values equal the CPU reference", "[debug][gles]") {
  SmallMlp m;
  sg::debug::TrainStep ts = m.step();
  auto be = backend("gles");
  auto exe = be->compile(ts.program);
  REQUIRE(exe->plan() != nullptr);
  // The CPU reference evaluation of the whole program from the same leaves (before the step's update commits):
  // every node's value, computed independently of the session.
  sg::cpu::LeafValues leaves;
  leaves[m.x.node().get()].assign(m.xv.begin(), m.xv.end());
  leaves[m.y.node().get()].assign(m.yv.begin(), m.yv.end());
  std::map<const sg::Node*, std::vector<double>> ref;
  std::vector<sg::NodePtr> roots = ts.program.roots();
  sg::cpu::evaluate(roots, leaves, {}, [&](const sg::Node& n, const std::vector<double>& v) { ref[&n] = v; });

  TempDir dir;
  sg::debug::Session s({.out_dir = dir.str()});
  s.attach(*exe, ts, be.get());
  s.run({{"x", &m.xv}, {"labels", &m.yv}});
  int recomputed = 0, checked = 0;
  for (const sg::NodePtr& n : s.nodes()) {
    if (n->is_leaf()) continue;
    INFO("n" << s.node_number(n.get()) << " " << n->label());
    const std::vector<float>* v = s.value(n.get());
    REQUIRE(v != nullptr);  // no "not stored" node left
    REQUIRE(ref.count(n.get()));
    REQUIRE(v->size() == ref[n.get()].size());
    for (size_t i = 0; i < v->size(); ++i) CHECK((*v)[i] == Approx(ref[n.get()][i]).epsilon(1e-4).margin(1e-6));
    const sg::debug::Capture* c = s.find(s.node_number(n.get()));
    REQUIRE(c != nullptr);
    if (c->recomputed) {
      ++recomputed;
      CHECK(fs::exists(dir.path / c->png));
    }
    if (!std::isnan(c->reference_diff)) {
      ++checked;
      CHECK(c->reference_diff < 1e-5);  // the kernel's stored output agrees with its CPU re-evaluation
    }
  }
  CHECK(recomputed > 0);  // the plan fused: some nodes were never stored on the device
  CHECK(checked > 0);
  // Every parameter-dependent forward node has its gradient's value too (the report's gradient column).
  for (auto& [fwd, adj] : ts.adjoint) {
    if (s.node_number(adj.get()) < 0 || adj->is_leaf()) continue;
    INFO("gradient n" << s.node_number(adj.get()));
    CHECK(s.value(adj.get()) != nullptr);
  }
}

TEST_CASE("layer and loss nodes name the user's source lines, forward and backward", "[debug]") {
  SmallMlp m;
  sg::debug::TrainStep ts = m.step();
  int forward = 0;
  for (const sg::NodePtr& n : ts.program.nodes()) {
    if (!n->loc.known() || n->op == sg::Op::Input || n->op == sg::Op::State) continue;  // fed data, optimizer state
    INFO(n->describe());
    // Layers: the line calling the model; loss: the line calling cross_entropy; Adam's update nodes: their
    // parameter's line, which is the line building the model (not nn.cpp, where Linear creates them).
    CHECK(n->loc.file == "test_debug.cpp");
    const uint32_t line = n->loc.line;
    const bool layer = line == static_cast<uint32_t>(m.call_line), lossy = line == static_cast<uint32_t>(m.loss_line);
    CHECK((layer || lossy || line == static_cast<uint32_t>(m.build_line)));
    forward += layer || lossy;
  }
  CHECK(forward > 10);
  // The matmuls of both Linear layers (and their VJPs) are on the line calling the model.
  int matmuls = 0;
  for (const sg::NodePtr& n : ts.program.nodes())
    if (n->op == sg::Op::MatMul) {
      CHECK(n->loc.str() == fmt::format("test_debug.cpp:{}", m.call_line));
      ++matmuls;
    }
  CHECK(matmuls >= 4);
}

TEST_CASE("a dense layer's weight gradient over an image input is drawn as one image tile per unit", "[debug]") {
  SmallMlp m;
  sg::debug::TrainStep ts = m.step();
  auto be = backend("cpu");
  auto exe = be->compile(ts.program);
  TempDir dir;
  sg::debug::Session s({.out_dir = dir.str()});
  s.attach(*exe, ts, be.get());
  s.run({{"x", &m.xv}, {"labels", &m.yv}});
  const sg::Node* g = ts.param_grads[0].node().get();  // d(loss)/d(1.weight): (5, 36) over (1, 6, 6) images
  REQUIRE(ts.params[0].first == "1.weight");
  const sg::debug::Capture& c = capture_of(s, g);
  REQUIRE(!c.png.empty());
  CHECK_THAT(c.note, Contains("drawn as 5 tiles of 6x6"));
  // The PNG is render_tensor of the gradient as (1, 5, 6, 6): 5 tiles in a row, 1-px separators.
  const std::vector<float>* v = s.value(g);
  REQUIRE(v != nullptr);
  sg::image::RenderOptions ro;
  ro.colormap = sg::image::Colormap::Diverging;
  sg::image::RenderResult want = sg::image::render_tensor(v->data(), {1, 5, 6, 6}, ro);
  CHECK(want.grid_cols == 5);
  CHECK(want.tile_h == want.tile_w);
  sg::image::RGBImage got = sg::image::read_png((dir.path / c.png).string());
  CHECK(got.width == want.image.width);
  CHECK(got.height == want.image.height);
  CHECK(got.rgb == want.image.rgb);
  // The parameter itself too, and the flattened input batch (4, 36) as 4 tiles.
  CHECK_THAT(capture_of(s, ts.params[0].second.node().get()).note, Contains("drawn as 5 tiles of 6x6"));
}

TEST_CASE("the debugger survives bad names and huge numbers and keeps the session", "[debug][repl]") {
  Tiny t;
  auto be = backend("cpu");
  auto exe = be->compile(t.ts.program);
  sg::debug::Session s;
  s.attach(*exe, t.ts, be.get());
  const std::string big = "99999999999999999999";  // > 2^64: std::stol would throw out_of_range
  std::istringstream in("print n" + big + "\nprint " + big + "\nshader " + big + "\nshader n" + big + "\nbreak n" +
                        big + "\nbreak 18446744073709551616\ngrad n" + big + "\nshow n" + big + "\nprint n-1\nprint n\n" +
                        "break n9\nprint n2\nnext\nprint n2\nquit\n");
  std::ostringstream out;
  s.set_debugger(in, out);
  std::vector<float> xv = {1, 2, 3, 4};
  s.run({{"x", &xv}});
  const std::string tr = out.str();
  INFO(tr);
  CHECK(s.quit_requested());
  CHECK_THAT(tr, Contains("no node n" + big + " (nodes are n0..n8)"));
  CHECK_THAT(tr, Contains("no node " + big + " (nodes are n0..n8)"));
  CHECK_THAT(tr, Contains("no kernel '" + big + "'"));
  CHECK_THAT(tr, Contains("no node 18446744073709551616"));
  CHECK_THAT(tr, Contains("no tensor 'n-1'"));
  CHECK_THAT(tr, Contains("no tensor 'n'"));
  CHECK_THAT(tr, Contains("no node n9 (nodes are n0..n8)"));
  // ...and the session went on: the last commands ran.
  CHECK_THAT(tr, Contains("launch 0 of 6: n002_map computed n2"));
  CHECK_THAT(tr, Contains("[1, 4, 9, 16]"));  // n2 = x * w
  // A capture entry with a huge node number matches nothing (ValueError), it does not crash.
  sg::debug::Session huge({.capture = {"n" + big}});
  CHECK_THROWS_AS(huge.attach(*exe, t.ts, be.get()), sg::ValueError);
}

TEST_CASE("step follows the graph: forward, then backward layer by layer, then updates, across kernels",
          "[debug][repl][gles]") {
  SmallMlp m;
  sg::debug::TrainStep ts = m.step();
  auto be = backend("gles");
  auto exe = be->compile(ts.program);
  REQUIRE(exe->plan() != nullptr);
  sg::debug::Session s;
  s.attach(*exe, ts, be.get());
  size_t computed = 0;
  for (auto& n : ts.program.nodes()) computed += !n->is_leaf();
  std::string script;
  for (size_t i = 0; i < computed; ++i) script += "step\n";
  std::istringstream in(script + "quit\n");
  std::ostringstream out;
  s.set_debugger(in, out);
  s.run({{"x", &m.xv}, {"labels", &m.yv}});
  const std::string t = out.str();
  INFO(t);
  // "[step 0] nK ... [role, ...]": every computed node once, in increasing node number; roles never go back.
  std::istringstream lines(t);
  std::string line;
  std::vector<int> shown;
  int prev_rank = -1;
  while (std::getline(lines, line)) {
    int step = 0, node = 0;
    if (std::sscanf(line.c_str(), "[step %d] n%d ", &step, &node) != 2) continue;
    INFO(line);
    const int rank = line.find("[forward") != std::string::npos    ? 0
                     : line.find("[backward") != std::string::npos ? 1
                     : line.find("[update") != std::string::npos   ? 2
                                                                   : -1;
    REQUIRE(rank >= 0);
    CHECK(rank >= prev_rank);
    prev_rank = rank;
    if (!shown.empty()) CHECK(node > shown.back());
    shown.push_back(node);
  }
  CHECK(shown.size() == computed);
  // The order is the graph's, not the kernels': some node comes after one whose kernel runs later.
  const sg::Plan* plan = exe->plan();
  auto kernel_of = [&](int k) {
    const sg::Node* n = s.nodes()[k].get();
    for (size_t i = 0; i < plan->kernels.size(); ++i)
      for (auto& m2 : plan->kernels[i].nodes)
        if (m2.get() == n) return static_cast<int>(i);
    return -1;
  };
  int out_of_kernel_order = 0;
  for (size_t i = 1; i < shown.size(); ++i) out_of_kernel_order += kernel_of(shown[i]) < kernel_of(shown[i - 1]);
  CHECK(out_of_kernel_order > 0);
}

TEST_CASE("debugger: node numbers too large for any integer type are 'no node', not the end of the session",
          "[debug][repl]") {
  // issue 19: print/break/show/grad n99999999999999999999 ended the session with std::stol's out_of_range,
  // shader 99999999999 with std::stoi's; DEBUGGING.md promises the debugger never crashes on a name
  sg::Tensor x = sg::input("x", {2});
  sg::Tensor w = sg::param("w", {2}, {1, -2});
  sg::Tensor loss = sg::sum(x * w);
  auto opt = sg::make_sgd({.lr = 0.5});
  sg::debug::TrainStep ts = sg::debug::make_train_step(loss, {{"w", w}}, *opt, {}, /*output_grads=*/false);
  auto be = backend("cpu");
  auto exe = be->compile(ts.program);
  sg::debug::Session s;
  s.attach(*exe, ts, be.get());
  std::istringstream in(
      "print n99999999999999999999\nbreak n99999999999999999999\nshow 99999999999999999999\n"
      "grad n99999999999999999999\nshader n99999999999\nshader 99999999999999999999999\nprint n9223372036854775807\n"
      "print w\nquit\n");
  std::ostringstream out;
  s.set_debugger(in, out, {.echo = true, .stop_at_start = true});
  std::vector<float> xv = {3, 4};
  s.run({{"x", &xv}});
  const std::string t = out.str();
  INFO(t);
  CHECK(s.quit_requested());  // the session reached `quit`: every command before it returned to the prompt
  CHECK(t.find("no node n99999999999999999999 (nodes are n0..n") != std::string::npos);
  size_t no_node = 0;
  for (size_t at = t.find("no node "); at != std::string::npos; at = t.find("no node ", at + 1)) ++no_node;
  CHECK(no_node == 5);  // print, break, show, grad and print n2^63-1
  CHECK(t.find("no kernel 'n99999999999'") != std::string::npos);
  CHECK(t.find("n1 param 'w' (2)") != std::string::npos);  // `print w` after them still ran
}
