// Benchmark helper (not a benchmark by itself): writes the web bundles bench/web_bench.mjs times that the export
// CLI has no model for. Today: SGEMM, a program "sgemm" with inputs a [N, N], b [N, N] and output c = a @ b, with
// both targets (webgpu with its gpu and cpu plans, webgl2) and no checks (the bundle runs the kernels the exporter schedules for a matmul).
//
//   build/bin/bench_web_export sgemm N DIR [--max-draw-buffers K] [--row-planes P] [--col-planes Q]
//                              [--min-parallel-texels T] [--webgpu-cpu]
//
// --min-parallel-texels T: the webgl2 plan's split-K (ScheduleOptions::min_parallel_texels; 0 = off, the default).
// --webgpu-cpu: only the webgpu plan of a CPU implementation (WebGPUTarget::cpu_device: CPU tile sizes), only the
// webgpu target (what `shadergrad export --webgpu-cpu --targets webgpu` writes for a model).
#include <cstdlib>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "sg/sg.h"
#include "sg/web_export.h"

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "sgemm") {
    std::cerr << "usage: bench_web_export sgemm N DIR [--max-draw-buffers K] [--row-planes P] [--col-planes Q] "
                 "[--min-parallel-texels T] [--webgpu-cpu]\n";
    return 2;
  }
  const int64_t n = std::atoll(argv[2]);
  if (n < 1 || n > 8192) {
    std::cerr << "bench_web_export: N must be in 1..8192\n";
    return 2;
  }
  try {
    sg::web::BundleSpec spec;
    spec.model = fmt::format("sgemm {}", n);
    sg::Tensor a = sg::input("a", {n, n});
    sg::Tensor b = sg::input("b", {n, n});
    sg::Program p;
    p.add_output("c", sg::matmul(a, b));
    spec.programs.push_back({"sgemm", std::move(p)});
    sg::web::BundleTargets t;
    for (int i = 4; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--max-draw-buffers" && i + 1 < argc) t.webgl2_target.max_draw_buffers = std::atoi(argv[++i]);
      else if (a == "--row-planes" && i + 1 < argc) t.webgl2_target.row_planes = std::atoi(argv[++i]);
      else if (a == "--col-planes" && i + 1 < argc) t.webgl2_target.col_planes = std::atoi(argv[++i]);
      else if (a == "--min-parallel-texels" && i + 1 < argc) t.webgl2_target.min_parallel_texels = std::atoll(argv[++i]);
      else if (a == "--webgpu-cpu") t.webgpu_plans = {"cpu"}, t.webgl2 = false;
      else throw sg::ValueError(fmt::format("unknown option '{}' (--max-draw-buffers K, --row-planes P, --col-planes Q, --min-parallel-texels T, --webgpu-cpu)", a));
    }
    const sg::web::ExportSummary s = sg::web::write_bundle(spec, t, argv[3]);
    std::cout << fmt::format("wrote sgemm N={} to {}: webgpu {} kernel(s), webgl2 {} kernel(s)\n", n, argv[3],
                             s.webgpu_kernels.at(0).second, s.kernels.empty() ? 0 : s.kernels.at(0).second);
  } catch (const sg::Error& e) {
    std::cerr << "bench_web_export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
