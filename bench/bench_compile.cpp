// bench_compile — how long the shader toolchain and the kernel cache take.
//
// Usage: bench_compile [N]   (N distinct kernels per row, default 16)
//
// Rows: cold compiles (glslang -> SPIR-V -> validate [-> spirv-opt -O] -> disassemble -> SPIRV-Cross) of N
// distinct fragment kernels (matmul + epilogue, shapes baked in as constants, so every source differs) and N
// distinct compute kernels; the GLSL ES re-check with glslang; kernel-cache memory hits, and disk hits from a fresh
// KernelCache on a temporary directory. Prints median / min / max per operation. Timings are only printed here,
// never asserted in tests.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sg/kernel_cache.h"
#include "sg/shader_compiler.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A fragment kernel as the codegen emits them: relu(A @ B + bias) * scale, shapes baked in.
std::string fragment_kernel(int i) {
  const int m = 8 + i, k = 16 + 3 * i, n = 12 + 2 * i, tex_w = 64;
  return fmt::format(R"(#version 450
// kernel matmul_bias_relu_{i}: f32[{m},{k}] @ f32[{k},{n}] + f32[{n}]
layout(set = 0, binding = 0) uniform sampler2D in_a;
layout(set = 0, binding = 1) uniform sampler2D in_b;
layout(set = 0, binding = 2) uniform sampler2D in_bias;
layout(location = 0) out vec4 out_texel;
const int M = {m};
const int K = {k};
const int N = {n};
const int TEX_W = {tex_w};
float fetch(sampler2D s, int e) {{
  int t = e / 4;
  return texelFetch(s, ivec2(t % TEX_W, t / TEX_W), 0)[e % 4];
}}
void main() {{
  ivec2 p = ivec2(gl_FragCoord.xy);
  int texel = p.y * TEX_W + p.x;
  vec4 r = vec4(0.0);
  for (int c = 0; c < 4; ++c) {{
    int e = texel * 4 + c;
    if (e >= M * N) break;
    int row = e / N;
    int col = e % N;
    float acc = 0.0;
    for (int kk = 0; kk < K; ++kk) acc += fetch(in_a, row * K + kk) * fetch(in_b, kk * N + col);
    r[c] = max(acc + fetch(in_bias, col), 0.0) * {scale:.3f};
  }}
  out_texel = r;
}}
)",
                     fmt::arg("i", i), fmt::arg("m", m), fmt::arg("k", k), fmt::arg("n", n), fmt::arg("tex_w", tex_w),
                     fmt::arg("scale", 1.0 + 0.125 * i));
}

// A compute kernel: fused elementwise chain over SSBOs.
std::string compute_kernel(int i) {
  return fmt::format(R"(#version 450
// kernel fused_elementwise_{i}
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer InX {{ float data[]; }} in_x;
layout(std430, set = 0, binding = 1) readonly buffer InY {{ float data[]; }} in_y;
layout(std430, set = 0, binding = 2) writeonly buffer Out {{ float data[]; }} out_z;
const uint COUNT = {count}u;
void main() {{
  uint e = gl_GlobalInvocationID.x;
  if (e >= COUNT) return;
  float x = in_x.data[e];
  float y = in_y.data[e];
  float s = 1.0 / (1.0 + exp(-x));
  out_z.data[e] = x * s * {a:.3f} + tanh(y) - {b:.3f};
}}
)",
                     fmt::arg("i", i), fmt::arg("count", 1000 + 64 * i), fmt::arg("a", 0.5 + i * 0.25),
                     fmt::arg("b", 0.01 * i));
}

struct Summary {
  double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Summary s;
  if (v.empty()) return s;
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

void row(const std::string& what, const char* unit, size_t n, const Summary& s) {
  fmt::print("| {:<52} | {:>5} | {:>10.3f} | {:>10.3f} | {:>10.3f} | {:<4} |\n", what, n, s.median, s.min, s.max, unit);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 16;
  std::vector<std::string> frag, comp;
  for (int i = 0; i < n; ++i) {
    frag.push_back(fragment_kernel(i));
    comp.push_back(compute_kernel(i));
  }

  fmt::print("bench_compile: {} distinct kernels per row (GLSL 4.50 fragment source ~{} bytes)\n\n", n,
             frag[0].size());
  fmt::print("| {:<52} | {:>5} | {:>10} | {:>10} | {:>10} | {:<4} |\n", "operation", "n", "median", "min", "max",
             "unit");
  fmt::print("|{:-<54}|{:-<7}|{:-<12}|{:-<12}|{:-<12}|{:-<6}|\n", "", "", "", "", "", "");

  // The very first compile also pays glslang::InitializeProcess and builtin symbol-table construction.
  {
    const auto t0 = Clock::now();
    (void)sg::compile_shader("warmup", fragment_kernel(1000), sg::ShaderStage::Fragment);
    row("first compile in the process (incl. glslang init)", "ms", 1, {ms_since(t0), ms_since(t0), ms_since(t0)});
  }

  std::vector<double> t;
  std::vector<sg::CompiledShader> compiled;
  for (int i = 0; i < n; ++i) {
    compiled.push_back(sg::compile_shader(fmt::format("frag{}", i), frag[i], sg::ShaderStage::Fragment));
    t.push_back(compiled.back().compile_ms);
  }
  row("cold compile, fragment -> ES 3.00", "ms", t.size(), summarize(t));

  t.clear();
  sg::ShaderCompileOptions opt;
  opt.optimize = true;
  for (int i = 0; i < n; ++i)
    t.push_back(sg::compile_shader(fmt::format("frag{}", i), frag[i], sg::ShaderStage::Fragment, opt).compile_ms);
  row("cold compile, fragment -> ES 3.00, spirv-opt -O", "ms", t.size(), summarize(t));

  t.clear();
  for (int i = 0; i < n; ++i)
    t.push_back(sg::compile_shader(fmt::format("comp{}", i), comp[i], sg::ShaderStage::Compute).compile_ms);
  row("cold compile, compute -> ES 3.10", "ms", t.size(), summarize(t));

  t.clear();
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    sg::check_gles_compiles(fmt::format("frag{}", i), compiled[i].gles, sg::ShaderStage::Fragment);
    t.push_back(ms_since(t0));
  }
  row("check_gles_compiles (glslang, ES 3.00)", "ms", t.size(), summarize(t));

  // Kernel cache.
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("sg_bench_kernel_cache_{}", std::random_device{}());
  std::filesystem::remove_all(dir);
  {
    sg::KernelCache cache(dir);
    t.clear();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      (void)cache.get_or_compile(fmt::format("frag{}", i), frag[i], sg::ShaderStage::Fragment);
      t.push_back(ms_since(t0));
    }
    row("cache miss (compile + write disk entry)", "ms", t.size(), summarize(t));

    constexpr int kReps = 50;
    t.clear();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      for (int r = 0; r < kReps; ++r)
        (void)cache.get_or_compile(fmt::format("frag{}", i), frag[i], sg::ShaderStage::Fragment);
      t.push_back(ms_since(t0) * 1000.0 / kReps);
    }
    row("cache hit, memory (hash source + lookup)", "us", t.size(), summarize(t));
    const auto st = cache.stats();
    if (st.misses != static_cast<uint64_t>(n) || st.hits != static_cast<uint64_t>(n) * kReps)
      fmt::print("WARNING: unexpected cache stats: hits {} misses {}\n", st.hits, st.misses);
  }
  {
    t.clear();
    uint64_t disk_hits = 0;
    for (int i = 0; i < n; ++i) {
      sg::KernelCache fresh(dir);  // new instance: nothing in memory
      const auto t0 = Clock::now();
      (void)fresh.get_or_compile(fmt::format("frag{}", i), frag[i], sg::ShaderStage::Fragment);
      t.push_back(ms_since(t0) * 1000.0);
      disk_hits += fresh.stats().disk_hits;
    }
    row("cache hit, disk (fresh KernelCache, read + verify)", "us", t.size(), summarize(t));
    if (disk_hits != static_cast<uint64_t>(n)) fmt::print("WARNING: only {} of {} were disk hits\n", disk_hits, n);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
