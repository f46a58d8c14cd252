// The webgpu plan of a bundle program (bundle.json `programs.NAME.webgpu`, docs/BUNDLE.md) and the WebGPU target's
// schedule. The plan is the compute contract of codegen/include/sg/compute_kernel.h written out for the JavaScript
// runtime: one storage buffer per value (std430 floats, row-major; allocations rounded up to whole vec4s), bindings
// = the kernel's inputs then its outputs, persistent values in front/back buffers swapped after every step, pooled
// temporaries from the memory plan, kernels in dispatch order with their workgroup size and count.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/target.h"
#include "sg/feeds.h"
#include "sg/web_export.h"

namespace sg::web {

using nlohmann::json;

namespace {

/// Bytes of a buffer of `numel` floats, rounded up to a whole vec4 (16 bytes; sg/compute_kernel.h "Buffers").
int64_t vec4_bytes(int64_t numel) { return (std::max<int64_t>(numel, 1) * 4 + 15) / 16 * 16; }

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Persistent: return "persistent";
    case ValueKind::Constant: return "constant";
    case ValueKind::Temp: return "temp";
  }
  return "?";
}

json shape_json(const Node& n) { return json(std::vector<int64_t>(n.shape.begin(), n.shape.end())); }

json value_json(const Plan& plan, const Value& v) {
  json j = {{"id", v.id},
            {"name", v.name},
            {"kind", kind_name(v.kind)},
            {"op", v.node->label()},
            {"node", plan.node_index(v.node.get())},
            {"shape", shape_json(*v.node)},
            {"dtype", dtype_name(v.node->dtype)},
            {"bytes", vec4_bytes(v.node->numel())}};
  if (v.transposed) j["transposed"] = true;
  if (v.node->loc.known()) j["source"] = v.node->loc.str();
  if (v.kind == ValueKind::Persistent || v.kind == ValueKind::Input) j["tensor"] = v.node->name;
  if (v.kind == ValueKind::Temp) {
    if (v.update_of >= 0) j["update_of"] = plan.values[v.update_of].node->name;
    else if (v.buffer >= 0) j["buffer"] = v.buffer;
  }
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
  json nodes = json::array();
  for (const NodePtr& n : k.nodes)
    nodes.push_back({{"node", plan.node_index(n.get())}, {"op", n->label()}, {"shape", shape_str(n->shape)},
                     {"source", n->loc.known() ? n->loc.str() : ""}});
  return {{"name", k.name},
          {"wgsl", shader_dir + "/" + k.name + ".wgsl"},
          {"entry_point", "main"},
          {"strategy", ck.strategy},
          {"workgroup_size", ck.local_size},
          {"workgroups", ck.workgroups},
          {"workgroup_storage_bytes", ck.shared_bytes},
          {"bindings", bindings},
          {"nodes", nodes}};
}

}  // namespace

namespace {

DeviceCaps webgpu_caps(const WebGPUTarget& t) {
  if (t.preset != "webgpu" && t.preset != "webgpu-compat")
    throw ValueError(fmt::format("WebGPUTarget::preset '{}' is unknown (choose webgpu or webgpu-compat)", t.preset));
  DeviceCaps caps = preset_caps(t.preset);
  if (t.cpu_device) caps.cpu_device = caps.compute.cpu_device = true;
  return caps;
}

}  // namespace

ComputeLimits WebGPUTarget::limits() const { return webgpu_caps(*this).compute; }

ScheduleOptions WebGPUTarget::schedule_options() const {
  return sg::schedule_options(make_target(TargetName::Wgsl, webgpu_caps(*this)), BackendOptions{});
}

json WebGPUTarget::to_json() const {
  const ComputeLimits l = limits();
  return {{"name", "webgpu"},
          {"preset", preset},
          {"cpu_device", cpu_device},
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
  const FeedChecker checker(plan.program);  // which inputs are class indices (one_hot/cross_entropy labels)
  json values = json::array();
  json inputs = json::array();
  for (const Value& v : plan.values) {
    if (v.planes > 1)
      throw CompileError(fmt::format("export (webgpu): value {} has texture planes, which the webgpu plan cannot "
                                     "store (schedule it with WebGPUTarget::schedule_options)", v.name));
    values.push_back(value_json(plan, v));
    if (v.kind == ValueKind::Input) {
      inputs.push_back({{"name", v.node->name}, {"value", v.id}, {"shape", shape_json(*v.node)},
                        {"dtype", dtype_name(v.node->dtype)}});
      if (int64_t c = checker.classes_of(*v.node); c > 0) inputs.back()["classes"] = c;  // runtime/web/feeds.js
    }
  }
  json outputs = json::array();
  for (size_t i = 0; i < plan.output_values.size(); ++i) {
    const Value& v = plan.values[plan.output_values[i]];
    outputs.push_back({{"name", plan.program.output_names[i]}, {"value", v.id}, {"shape", shape_json(*v.node)},
                       {"dtype", dtype_name(v.node->dtype)}});
  }
  json updates = json::array();
  for (auto& [target, value] : plan.updates)
    updates.push_back({{"target", plan.values[target].node->name}, {"target_value", target}, {"value", value}});
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
  return {{"inputs", inputs},   {"outputs", outputs}, {"updates", updates},
          {"values", values},   {"buffers", buffers}, {"kernels", ks},
          {"kernels_per_run", plan.kernels.size()}, {"peak_bytes", peak}};
}

}  // namespace sg::web
