// Every DSL op, forward and backward, on the compute backends against the CPU backend (the case lists of
// tests/op_cases.h), plus cases sized to cross the tiled kernels' tile and K-chunk boundaries (odd sizes, not
// multiples of any tile size or of 4), and run()'s feed errors. CI runs gles-compute on Mesa llvmpipe.
// A compute backend joins with one line: SG_OP_CASE_TESTS("<kind>", "[<kind>][ops]", only("<kind>"), only("<kind>")).
#include "op_cases.h"

using namespace sg;
using namespace sg::op_cases;

namespace {

/// One backend of `kind` with default options.
[[maybe_unused]] std::vector<BackendOptions> only(const char* kind) {
  BackendOptions bo;
  bo.kind = kind;
  return {bo};
}

/// gles-compute with the device's tile sizes (CPU ones on llvmpipe), and with the GPU tile sizes (16x16
/// invocations of 8x8 outputs), so that CI also runs the kernels a GPU gets.
std::vector<BackendOptions> both_tile_sizes() {
  BackendOptions cpu_tiles, gpu_tiles;
  cpu_tiles.kind = gpu_tiles.kind = "gles-compute";
  gpu_tiles.gpu_tiles = true;
  return {cpu_tiles, gpu_tiles};
}

/// Vulkan on lavapipe (pinned, validation layer on, zero messages asserted after every run) with the device's
/// tile sizes on the direct-map path, and with the GPU tile sizes on the staging path a discrete GPU takes.
std::vector<BackendOptions> vulkan_variants() {
  BackendOptions direct = sg::testing::vulkan_options(-1), staged = sg::testing::vulkan_options(0);
  staged.gpu_tiles = true;
  return {direct, staged};
}

}  // namespace

SG_OP_CASE_TESTS("vulkan", "[vulkan][ops]", vulkan_variants(), vulkan_variants())
SG_OP_CASE_TESTS("gles-compute", "[gles-compute][ops]", both_tile_sizes(), both_tile_sizes())

namespace {

/// Matmuls and convs sized to cross tile and K-chunk boundaries (forward and backward: x^T.dh, conv gradients).
void add_tile_boundary_cases(Suite& s) {
  // sizes that are multiples of no tile size (8, 16, 32, 64, 128) nor of 4
  Tensor a = s.in("a", {67, 131}, uniform(67 * 131, 201, -1, 1));
  Tensor b = s.in("b", {131, 45}, uniform(131 * 45, 202, -1, 1));
  Tensor bias = s.in("bias", {45}, uniform(45, 203, -1, 1));
  Tensor w = s.in("w", {45, 131}, uniform(45 * 131, 204, -1, 1));
  Tensor big_a = s.in("big_a", {133, 70}, uniform(133 * 70, 205, -1, 1));
  Tensor big_b = s.in("big_b", {70, 141}, uniform(70 * 141, 206, -1, 1));
  Tensor x = s.in("x", {3, 5, 13, 11}, uniform(3 * 5 * 13 * 11, 207, -1, 1));
  Tensor k = s.in("k", {7, 5, 3, 3}, uniform(7 * 5 * 9, 208, -0.5, 0.5));
  Tensor kb = s.in("kb", {7}, uniform(7, 209, -0.5, 0.5));
  Tensor ba = s.in("ba", {3, 17, 19}, uniform(3 * 17 * 19, 210, -1, 1));
  Tensor bb = s.in("bb", {3, 19, 23}, uniform(3 * 19 * 23, 211, -1, 1));
  s.add("matmul 67x131 @ 131x45 + bias + relu", relu(matmul(a, b) + bias), {a, b, bias}, kReduce);
  s.add("x.W^T 67x131 . (45x131)^T", matmul(a, transpose(w)), {a, w}, kReduce);
  s.add("matmul 133x70 @ 70x141", matmul(big_a, big_b), {big_a, big_b}, kReduce);
  s.add("matmul batched 3x17x19 @ 3x19x23", matmul(ba, bb), {ba, bb}, kReduce);
  s.add("conv2d 5->7 3x3 padding 1 + bias + relu", relu(conv2d(x, k, kb, {.padding = {1, 1}})), {x, k, kb}, kReduce);
  s.add("conv2d stride 2", conv2d(x, k, Tensor(), {.stride = {2, 2}}), {x, k}, kReduce);
}

}  // namespace

TEST_CASE("gles-compute matmul and conv across tile and K-chunk boundaries equal the CPU backend",
          "[gles-compute][ops]") {
  Suite s;
  add_tile_boundary_cases(s);
  s.check(both_tile_sizes());
}

TEST_CASE("vulkan: tiled kernels under every kind of tile configuration equal the CPU backend", "[vulkan][ops]") {
  // each configuration forced on every tiled kernel (fitted per kernel): vec4 and scalar register tiles, prefetch
  // on and off, grouped and row-major workgroup orders, square and skewed tiles, chunks of 8 and 16 (the GPU
  // heuristic's 16x16.8x4.k8.g8.v4.pf, shrunk per kernel, runs in the op cases' GPU-tile variant)
  for (const char* cfg : {"8x8.4x4.k8.g1", "8x8.4x4.k16.g2.v4.pf", "4x4.8x4.k16.g3.v4.kr", "8x16.4x4.k8.g1.pf.kr"}) {
    INFO("tile config " << cfg);
    auto t = parse_tile_config(cfg);
    REQUIRE(t);
    CHECK(t->str() == cfg);
    BackendOptions bo = sg::testing::vulkan_options(-1);
    bo.vulkan.tiles = t;
    Suite s;
    add_tile_boundary_cases(s);
    s.check({bo});
  }
}

TEST_CASE("gles-compute run: a missing or mis-sized feed throws ValueError naming the input", "[gles-compute][ops]") {
  Tensor feats = input("features", {3, 5});
  Tensor targets = input("targets", {3}, DType::i32);
  Program p;
  p.add_output("loss", cross_entropy(matmul(feats, param("wt", {5, 4}, uniform(20, 91, -1, 1))), targets));
  std::vector<float> xs = uniform(15, 92, -1, 1), ys = {0, 3, 1}, short_x(14);
  auto be = make_backend({.kind = "gles-compute"}).backend;
  REQUIRE(be->name() == "gles-compute");
  auto exe = be->compile(p);
  CHECK_THROWS_WITH(exe->run({{"features", &xs}}), Catch::Contains("'targets'") && Catch::Contains("not fed"));
  CHECK_THROWS_AS(exe->run({{"features", &short_x}, {"targets", &ys}}), ValueError);
  CHECK_THROWS_WITH(exe->run({{"features", &short_x}, {"targets", &ys}}),
                    Catch::Contains("'features'") && Catch::Contains("15") && Catch::Contains("14"));
  auto got = exe->run({{"targets", &ys}, {"features", &xs}});  // a failed run leaves the executable usable
  auto cpu = make_cpu_backend();
  auto want = cpu->compile(p)->run({{"targets", &ys}, {"features", &xs}});
  CHECK(compare(got[0], want[0], kReduce).ok);
}
