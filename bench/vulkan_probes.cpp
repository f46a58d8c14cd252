// bench_ops' Vulkan probes, profile and roofline (see vulkan_probes.h).
#include "vulkan_probes.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "sg/shader_compiler.h"
#include "sg/vulkan_device.h"

namespace bench_vk {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

constexpr int kAluIters = 512;
constexpr int kAluChains = 8;

std::string alu_source() {
  std::string s = "#version 450\nlayout(local_size_x = 256) in;\n"
                  "layout(std430, binding = 0) readonly buffer Coef { vec4 c; } coef;\n"
                  "layout(std430, binding = 1) writeonly buffer Out { vec4 v[]; } outp;\n"
                  "void main() {\n  uint i = gl_GlobalInvocationID.x;\n  vec4 c = coef.c;\n"
                  "  vec4 base = vec4(float(i % 1024u) * 1e-4, 0.25, 0.5, 0.75);\n";
  for (int k = 0; k < kAluChains; ++k) s += fmt::format("  vec4 x{} = base + float({}) * 0.01;\n", k, k);
  s += fmt::format("  for (int it = 0; it < {}; ++it) {{\n", kAluIters);
  for (int k = 0; k < kAluChains; ++k) s += fmt::format("    x{0} = x{0} * c.x + c.y;\n", k);
  s += "  }\n  outp.v[i] = x0";
  for (int k = 1; k < kAluChains; ++k) s += fmt::format(" + x{}", k);
  return s + ";\n}\n";
}

const char* kCopySource = R"(#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { vec4 v[]; } inp;
layout(std430, binding = 1) writeonly buffer Out { vec4 v[]; } outp;
void main() {
  uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < COUNT; i += stride) outp.v[i] = 2.0 * inp.v[i];
}
)";

/// Median ms of the last 20 of 40 dispatches of `glsl` over buffers a, b with `groups` workgroups.
double time_dispatch(sg::vk::Device& dev, const std::string& glsl, const std::string& name, sg::vk::Buffer& a,
                     sg::vk::Buffer& b, uint32_t groups) {
  const sg::CompiledShader sh = sg::compile_shader(name, glsl, sg::ShaderStage::Compute);
  sg::vk::Pipeline pipe = dev.create_pipeline(sh.spirv, 2, {256, 1, 1}, name);
  sg::vk::DescriptorPool pool = dev.create_descriptor_pool(1, 2);
  VkDescriptorSet set = dev.allocate_set(pool, pipe, {&a, &b});
  constexpr int reps = 40;  // the first half untimed: an idle GPU clocks up over some ms of work
  sg::vk::QueryPool q = dev.create_timestamp_pool(2 * reps);
  sg::vk::CommandBuffer cmd = dev.create_command_buffer();
  cmd.begin();
  cmd.reset_queries(q, 0, 2 * reps);
  for (uint32_t r = 0; r < reps; ++r) {
    cmd.barrier();
    cmd.timestamp(q, 2 * r);
    cmd.dispatch(pipe, set, {groups, 1, 1});
    cmd.timestamp(q, 2 * r + 1);
  }
  cmd.barrier_to_host();
  cmd.end();
  dev.submit_and_wait(cmd);
  auto ns = dev.read_timestamps_ns(q, 0, 2 * reps);
  std::vector<double> ms;
  for (int r = reps / 2; r < reps; ++r) ms.push_back((ns[2 * r + 1] - ns[2 * r]) * 1e-6);
  return median(ms);
}

}  // namespace

Ceilings run_probes(sg::Backend& vulkan) {
  sg::vk::Device& dev = sg::vulkan_device(vulkan);
  Ceilings c;
  if (!dev.caps().timestamps) {
    c.ok = false;
    c.check = "no timestamps on this device";
    return c;
  }
  const bool cpu = dev.caps().limits.cpu_device;
  // ALU: invocations x 8 chains x 4 lanes x iters x 2 flops
  const uint32_t groups = cpu ? 64 : 8192;
  const int64_t inv = int64_t{groups} * 256;
  sg::vk::Buffer coef = dev.create_buffer(16, "probe.coef"), out = dev.create_buffer(inv * 16, "probe.out");
  const float cv[4] = {0.999f, 0.001f, 0.f, 0.f};
  dev.upload(coef, cv, 16);
  const double alu_ms = time_dispatch(dev, alu_source(), "vk_alu_probe", coef, out, groups);
  c.alu_gflops = 2.0 * 4 * kAluChains * kAluIters * static_cast<double>(inv) / (alu_ms * 1e-3) / 1e9;
  std::vector<float> got(static_cast<size_t>(inv * 4));
  dev.download(out, got.data(), inv * 16);
  double err = 0;
  for (int64_t i : {int64_t{0}, inv / 3, inv - 1}) {
    const float base[4] = {static_cast<float>(i % 1024) * 1e-4f, 0.25f, 0.5f, 0.75f};
    for (int l = 0; l < 4; ++l) {
      double sum = 0;
      for (int k = 0; k < kAluChains; ++k) {
        float x = base[l] + static_cast<float>(k) * 0.01f;
        for (int it = 0; it < kAluIters; ++it) x = x * cv[0] + cv[1];
        sum += x;
      }
      err = std::max(err, std::abs(sum - got[i * 4 + l]) / (1 + std::abs(sum)));
    }
  }
  // bandwidth: 2 x 256 MiB on GPUs (far beyond a 50 MB L2), 2 x 16 MiB on CPU devices
  const int64_t vec4s = cpu ? (int64_t{1} << 20) : (int64_t{1} << 24);
  std::string copy = kCopySource;
  copy.replace(copy.find("COUNT"), 5, fmt::format("{}u", vec4s));
  std::vector<float> in(static_cast<size_t>(vec4s * 4));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 4099);
  sg::vk::Buffer src = dev.create_buffer(vec4s * 16, "probe.src"), dst = dev.create_buffer(vec4s * 16, "probe.dst");
  dev.upload(src, in.data(), vec4s * 16);
  const double bw_ms = time_dispatch(dev, copy, "vk_bandwidth_probe", src, dst, cpu ? 64 : 4096);
  c.bw_gbs = 2.0 * static_cast<double>(vec4s) * 16 / (bw_ms * 1e-3) / 1e9;
  std::vector<float> back(in.size());
  dev.download(dst, back.data(), vec4s * 16);
  int64_t bad = 0;
  for (size_t i = 0; i < in.size(); i += 997) bad += back[i] != 2 * in[i];
  c.ok = err <= 1e-4 && bad == 0;
  c.check = fmt::format("{} (ALU rel {:.1e} on 12, copy {} of {} sampled wrong)", c.ok ? "ok" : "FAIL", err, bad,
                        in.size() / 997 + 1);
  fmt::print("Vulkan compute ceilings on {}: ALU {:.1f} GFLOP/s ({:.3f} ms), bandwidth {:.1f} GB/s ({:.3f} ms for 2 x {} "
             "MiB); {}\n",
             dev.caps().name, c.alu_gflops, alu_ms, c.bw_gbs, bw_ms, vec4s * 16 >> 20, c.check);
  return c;
}

Work program_work(const sg::Plan& plan) {
  Work w;
  for (auto& n : plan.program.nodes()) {
    const double out = static_cast<double>(n->numel());
    switch (n->op) {
      case sg::Op::MatMul: w.flop += 2 * out * static_cast<double>(n->inputs[0]->shape.back()); break;
      case sg::Op::Conv2d:
      case sg::Op::Conv2dGradInput: {
        const auto& ws = n->inputs[1]->shape;  // (O, C, KH, KW)
        const double macs = n->op == sg::Op::Conv2d ? out * ws[1] * ws[2] * ws[3]
                                                    : static_cast<double>(n->inputs[0]->numel()) * ws[1] * ws[2] * ws[3];
        w.flop += 2 * macs;
        break;
      }
      case sg::Op::Conv2dGradWeight: w.flop += 2 * static_cast<double>(n->inputs[0]->numel()) * n->shape[1] * n->shape[2] * n->shape[3]; break;
      case sg::Op::Reduce: w.flop += static_cast<double>(n->inputs[0]->numel()); break;
      case sg::Op::Map: w.flop += out; break;
      default: break;
    }
  }
  for (auto& v : plan.values)
    if (v.kind == sg::ValueKind::Input || v.kind == sg::ValueKind::Persistent || v.kind == sg::ValueKind::Constant)
      w.bytes += 4.0 * static_cast<double>(v.node->numel());
  for (auto& [target, value] : plan.updates) w.bytes += 4.0 * static_cast<double>(plan.values[value].node->numel());
  for (int id : plan.output_values) w.bytes += 4.0 * static_cast<double>(plan.values[id].node->numel());
  return w;
}

void print_roofline_header() {
  fmt::print("\n| {:<34} | {:>11} | {:>10} | {:>10} | {:>8} | {:>10} | {:>9} | {:>9} | {:>7} |\n", "case (vulkan)", "GFLOP",
             "MB moved", "ms", "FLOP/B", "GFLOP/s", "GB/s", "bound", "of bound");
  fmt::print("|{:-<36}|{:-<13}|{:-<12}|{:-<12}|{:-<10}|{:-<12}|{:-<11}|{:-<11}|{:-<9}|\n", "", "", "", "", "", "", "", "", "");
}

nlohmann::json roofline_row(const std::string& label, const Work& w, double ms, const Ceilings& c) {
  const double s = ms * 1e-3, ai = w.flop / std::max(w.bytes, 1.0);
  const double gflops = w.flop / s / 1e9, gbs = w.bytes / s / 1e9;
  const double bound = std::min(c.alu_gflops, ai * c.bw_gbs);  // GFLOP/s the roofline allows
  const bool alu_bound = c.alu_gflops <= ai * c.bw_gbs;
  fmt::print("| {:<34} | {:>11.4f} | {:>10.3f} | {:>10.4f} | {:>8.1f} | {:>10.1f} | {:>9.1f} | {:>9} | {:>6.1f}% |\n", label,
             w.flop / 1e9, w.bytes / 1e6, ms, ai, gflops, gbs, alu_bound ? "ALU" : "bandwidth",
             bound > 0 ? 100 * gflops / bound : 0);
  return {{"case", label},         {"gflop", w.flop / 1e9}, {"mbytes", w.bytes / 1e6},   {"ms", ms},
          {"flop_per_byte", ai},   {"gflops", gflops},      {"gbs", gbs},                {"bound", alu_bound ? "alu" : "bandwidth"},
          {"bound_gflops", bound}, {"alu_gflops", c.alu_gflops}, {"bw_gbs", c.bw_gbs}};
}

nlohmann::json profile_step(sg::Backend& profiled, sg::Backend& plain, const sg::Program& step,
                            const std::vector<sg::Feed>& feeds, const std::string& label, int reps) {
  auto exe = profiled.compile(step);
  auto pexe = plain.compile(step);
  const auto* cks = exe->compute_kernels();
  std::vector<std::vector<double>> ms, gap;
  std::vector<std::string> names;
  std::vector<double> wall, wall_plain;
  using Clock = std::chrono::steady_clock;
  for (int r = 0; r < reps + 2; ++r) {  // 2 untimed
    auto t0 = Clock::now();
    (void)exe->run(feeds);
    const double w = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    t0 = Clock::now();
    (void)pexe->run(feeds);
    const double wp = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r < 2) continue;
    wall.push_back(w);
    wall_plain.push_back(wp);
    auto t = exe->last_timings();
    ms.resize(t.size()), gap.resize(t.size()), names.resize(t.size());
    for (size_t k = 0; k < t.size(); ++k) {
      names[k] = t[k].kernel;
      ms[k].push_back(t[k].ms);
      gap[k].push_back(k == 0 || t[k].start_ms < 0 ? 0.0 : t[k].start_ms - (t[k - 1].start_ms + t[k - 1].ms));
    }
  }
  fmt::print("\nVulkan per-kernel profile: {} ({} runs, median per kernel; Vulkan timestamps, a barrier between every "
             "dispatch while profiling; gap = from the previous kernel's end to this one's start):\n\n",
             label, reps);
  fmt::print("| {:>2} | {:<44} | {:<17} | {:<24} | {:>9} | {:>8} | {:>6} |\n", "#", "kernel", "strategy", "tile config",
             "ms", "gap ms", "share");
  fmt::print("|{:-<4}|{:-<46}|{:-<19}|{:-<26}|{:-<11}|{:-<10}|{:-<8}|\n", "", "", "", "", "", "", "");
  double total = 0, total_gap = 0;
  std::vector<double> med(ms.size());
  for (size_t k = 0; k < ms.size(); ++k) total += (med[k] = median(ms[k])), total_gap += median(gap[k]);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 0; k < ms.size(); ++k) {
    const sg::ComputeKernel* ck = cks && k < cks->size() ? &(*cks)[k] : nullptr;
    const std::string cfg = ck && ck->tiles ? ck->tiles->str() + (ck->tuning.empty() ? "" : " *") : "-";
    fmt::print("| {:>2} | {:<44} | {:<17} | {:<24} | {:>9.4f} | {:>8.4f} | {:>5.1f}% |\n", k, names[k],
               ck ? ck->strategy : "?", cfg, med[k], median(gap[k]), total > 0 ? 100 * med[k] / total : 0);
    rows.push_back({{"kernel", names[k]}, {"strategy", ck ? ck->strategy : ""}, {"config", cfg}, {"ms", med[k]},
                    {"gap_ms", median(gap[k])}, {"tuning", ck ? ck->tuning : ""}});
  }
  const double wm = median(wall), wpm = median(wall_plain);
  fmt::print("| {:>2} | {:<44} | {:<17} | {:<24} | {:>9.4f} | {:>8.4f} | {:>6} |\n", "", "sum of kernels, of gaps", "", "",
             total, total_gap, "");
  fmt::print("| {:>2} | {:<44} | {:<17} | {:<24} | {:>9.4f} | {:>8} | {:>6} |\n", "", "whole run(), profiled", "", "", wm, "",
             "");
  fmt::print("| {:>2} | {:<44} | {:<17} | {:<24} | {:>9.4f} | {:>8} | {:>6} |\n", "", "whole run(), unprofiled (as timed)", "",
             "", wpm, "", "");
  fmt::print("(* = tile config picked by the autotuner; host + submit overhead of the unprofiled run ~ {:.4f} ms beyond "
             "the kernels)\n",
             wpm - total);
  return {{"label", label}, {"kernels", rows}, {"sum_kernel_ms", total}, {"sum_gap_ms", total_gap},
          {"run_ms_profiled", wm}, {"run_ms", wpm}};
}

}  // namespace bench_vk
