// The webgpu plan of a bundle program (bundle.json `programs.NAME.webgpu`, docs/BUNDLE.md) and the WebGPU target's
// schedule. The plan is the compute contract of codegen/include/sg/compute_kernel.h written out for the JavaScript
// runtime: one storage buffer per value (std430 floats, row-major; allocations rounded up to whole vec4s), bindings
// = the kernel's inputs then its outputs, persistent values in front/back buffers swapped after every step, pooled
// temporaries from the memory plan, kernels in dispatch order with their workgroup size and count.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/target.h"
#include "sg/web_export.h"
#include "web_records.h"

namespace sg::web {

using nlohmann::json;

namespace {

/// Bytes of a buffer of `numel` floats, rounded up to a whole vec4 (16 bytes; sg/compute_kernel.h "Buffers").
int64_t vec4_bytes(int64_t numel) { return (std::max<int64_t>(numel, 1) * 4 + 15) / 16 * 16; }

/// The shared value record plus the buffer size (vec4-rounded bytes) and, for transposed storage, the flag.
json value_json(const Plan& plan, const Value& v) {
  json j = records::value(plan, v);
  j["bytes"] = vec4_bytes(v.node->numel());
  if (v.transposed) j["transposed"] = true;
  return j;
}

json kernel_json(const Plan& plan, const Kernel& k, const ComputeKernel& ck, const std::string& shader_dir) {
  if (ck.bindings.size() != k.inputs.size() + k.outputs.size())
    throw CompileError(fmt::format("export (webgpu): kernel {} has {} bindings, expected inputs + outputs = {}",
                                   k.name, ck.bindings.size(), k.inputs.size() + k.outputs.size()));
  json bindings = json::array();
  for (size_t b = 0; b < ck.bindings.size(); ++b)
    bindings.push_back({{"binding", b},
                        {"value", ck.bindings[b]},
                        {"name", plan.values[ck.bindings[b]].name},
                        {"access", b < k.inputs.size() ? "read" : "read_write"}});
  return {{"name", k.name},
          {"wgsl", shader_dir + "/" + k.name + ".wgsl"},
          {"entry_point", "main"},
          {"strategy", ck.strategy},
          {"workgroup_size", ck.local_size},
          {"workgroups", ck.workgroups},
          {"workgroup_storage_bytes", ck.shared_bytes},
          {"subgroup_size", ck.subgroup_size},
          {"bindings", bindings},
          {"nodes", records::kernel_nodes(plan, k)}};
}

}  // namespace

namespace {

/// Storage buffers per kernel of the cpu plans: what Chromium's SwiftShader adapter offers over the default 8 (10:
/// its compatibility-mode adapter limits in docs/perf-log/W3.md; core-mode devices requested with 10 in
/// docs/perf-log/W16.md). W1's fused Adam update
/// (its gradient's contraction with m, v and W1: 7 inputs, 3 outputs) needs 10. The runtime requests the plan's
/// limits and takes the gpu plan on an adapter with fewer (runtime/web/webgpu.js chooseWebGPUPlan).
constexpr int kCpuAdapterStorageBuffers = 10;
/// Elements per invocation of the cpu plans' per-element kernels (ComputeLimits::element_run): on Chromium's
/// SwiftShader charlm's softmax kernels (524288 elements) ran in 6-9 ms with 4 instead of 13-18 ms with 1, the same
/// 4 as a loop 10-15 ms (docs/perf-log/W23.md).
constexpr int kCpuElementRun = 4;

DeviceCaps webgpu_caps(const WebGPUTarget& t) {
  if (t.preset != "webgpu" && t.preset != "webgpu-compat")
    throw ValueError(fmt::format("WebGPUTarget::preset '{}' is unknown (choose webgpu or webgpu-compat)", t.preset));
  DeviceCaps caps = preset_caps(t.preset);
  if (t.cpu_device) {
    caps.cpu_device = caps.compute.cpu_device = caps.compute.register_tiles = true;
    caps.compute.max_storage_buffers = kCpuAdapterStorageBuffers;
    caps.compute.element_run = kCpuElementRun;
  }
  if (t.subgroup_broadcast) {
    if (!t.cpu_device)
      throw ValueError("WebGPUTarget::subgroup_broadcast needs cpu_device (the register tiles of the cpu plans)");
    caps.compute.broadcast_lanes = 4;
  }
  return caps;
}

}  // namespace

const WebGPUPlanKind& webgpu_plan_kind(const std::string& name) {
  for (const WebGPUPlanKind& k : kWebGPUPlans)
    if (name == k.name) return k;
  std::string names;
  for (const WebGPUPlanKind& k : kWebGPUPlans) names += std::string(names.empty() ? "" : ", ") + k.name;
  throw ValueError(fmt::format("export: unknown webgpu plan '{}' (choose {})", name, names));
}

json cpu_adapter_rule() {
  json names = json::array();
  for (std::string_view n : cpu_renderer_names()) names.push_back(n);
  return {{"fallback_adapter", true}, {"names", names}};
}

ComputeLimits WebGPUTarget::limits() const { return webgpu_caps(*this).compute; }

ScheduleOptions WebGPUTarget::schedule_options() const {
  ScheduleOptions so = sg::schedule_options(make_target(TargetName::Wgsl, webgpu_caps(*this)), BackendOptions{});
  // CPU implementations of WebGPU are SwiftShader's as well: its compiler took over 4 minutes for the pipeline of a
  // register-tiled contraction reading a concat (3 guarded reads, 48 as emitted; issue 37), so the WebGL2 limit holds
  if (cpu_device) so.max_guarded_reads = kWebGL2MaxGuardedReads;
  return so;
}

json WebGPUTarget::to_json() const {
  const ComputeLimits l = limits();
  return {{"name", "webgpu"},
          {"preset", preset},
          {"cpu_device", cpu_device},
          {"register_tiles", l.register_tiles},
          {"subgroup_broadcast", l.broadcast_lanes},
          {"stage", "compute"},
          {"language", "wgsl"},
          {"storage", "buffers"},
          {"max_storage_buffers", l.max_storage_buffers},
          {"max_workgroup_invocations", l.max_workgroup_invocations},
          {"max_workgroup_storage_bytes", l.max_shared_bytes},
          {"max_workgroups_per_dimension", l.max_workgroup_count},
          {"max_buffer_bytes", l.max_buffer_bytes}};
}

json describe_webgpu_program(const Plan& plan, const std::vector<ComputeKernel>& kernels,
                             const std::string& shader_dir) {
  json values = json::array();
  for (const Value& v : plan.values) {
    if (v.planes > 1)
      throw CompileError(fmt::format("export (webgpu): value {} has texture planes, which the webgpu plan cannot "
                                     "store (schedule it with WebGPUTarget::schedule_options)", v.name));
    values.push_back(value_json(plan, v));
  }
  json buffers = json::array();
  int64_t peak = 0;
  for (const TextureLayout& b : plan.buffers) {
    buffers.push_back({{"bytes", vec4_bytes(b.numel)}});
    peak += vec4_bytes(b.numel);
  }
  for (const Value& v : plan.values)
    if (v.kind != ValueKind::Temp) peak += vec4_bytes(v.node->numel()) * (v.kind == ValueKind::Persistent ? 2 : 1);
  json ks = json::array();
  for (size_t i = 0; i < plan.kernels.size(); ++i) ks.push_back(kernel_json(plan, plan.kernels[i], kernels.at(i), shader_dir));
  json j = records::program_interface(plan);
  j["values"] = values;
  j["buffers"] = buffers;
  j["kernels"] = ks;
  j["kernels_per_run"] = plan.kernels.size();
  j["peak_bytes"] = peak;
  return j;
}

}  // namespace sg::web
