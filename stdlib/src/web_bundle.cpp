// The bundle description of a scheduled program (bundle.json `programs.NAME`, docs/BUNDLE.md) and the WebGL2
// target's schedule. Built only from the public Plan/Value/Kernel structs (sg/schedule.h); Plan::to_json stays
// the dump format, this is the contract with the JavaScript runtime: every field the runtime needs to allocate
// textures, bind samplers and render targets, draw, read back and ping-pong, and nothing it has to infer.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/target.h"
#include "sg/web_export.h"
#include "web_records.h"

namespace sg::web {

using nlohmann::json;

ScheduleOptions WebGL2Target::schedule_options() const {
  auto range = [](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw ValueError(fmt::format("WebGL2Target::{} must be in {}..{}, got {}", field, lo, hi, v));
  };
  range("max_texture_size", max_texture_size, 64, 65536);
  range("max_draw_buffers", max_draw_buffers, 1, 8);
  range("max_texture_units", max_texture_units, 1, 16);  // the fragment target's sampler budget (sg::make_target)
  range("row_planes", row_planes, 1, 8);
  range("col_planes", col_planes, 1, 2);
  range("min_parallel_texels", min_parallel_texels, 0, int64_t{1} << 30);
  // the fragment target of a device with these limits, through the one schedule policy (sg::schedule_options)
  DeviceCaps caps;
  caps.renderer = "a WebGL2 device (bundle)";
  caps.max_texture_size = max_texture_size;
  caps.max_draw_buffers = max_draw_buffers;
  caps.max_texture_units = max_texture_units;
  BackendOptions opt;
  opt.row_planes = row_planes;
  opt.col_planes = col_planes;
  opt.union_domains = union_domains;
  opt.row_layout = row_aligned_layout;
  opt.min_parallel_texels = min_parallel_texels;
  ScheduleOptions so = sg::schedule_options(make_target(TargetName::GlslEsFragment, caps), opt);
  so.max_guarded_reads = kWebGL2MaxGuardedReads;  // what Chromium's SwiftShader WebGL2 survives (web_export.h)
  return so;
}

json WebGL2Target::to_json() const {
  return {{"name", "webgl2"},
          {"stage", "fragment"},
          {"language", "glsl-es-3.00"},
          {"texel_format", "RGBA32F"},
          {"max_texture_size", max_texture_size},
          {"max_draw_buffers", max_draw_buffers},
          {"max_texture_units", max_texture_units},
          {"row_planes", row_planes},
          {"col_planes", col_planes},
          {"union_domains", union_domains},
          {"row_aligned_layout", row_aligned_layout},
          {"min_parallel_texels", min_parallel_texels}};
}

namespace {

json layout_json(const TextureLayout& l) {
  return {{"numel", l.numel}, {"texels", l.texels}, {"width", l.width}, {"height", l.height}};
}

/// Where a value lives and how its elements are arranged there: the shared record plus the texture layout, the
/// allocated extent and the storage (transposed, planes).
json value_json(const Plan& plan, const Value& v) {
  json j = records::value(plan, v);
  j["layout"] = layout_json(v.layout);
  j["allocated"] = {v.extent.width, v.extent.height};
  j["storage"] = {{"transposed", v.transposed},
                  {"planes", v.planes},
                  {"row_planes", v.row_planes()},
                  {"col_planes", v.col_planes}};
  if (v.kind == ValueKind::Temp && v.update_of < 0 && v.buffer >= 0 && v.planes > 1) j["plane_buffers"] = v.plane_buffers;
  return j;
}

json kernel_json(const Plan& plan, const Kernel& k, const std::string& shader_dir) {
  json samplers = json::array();
  for (int in : k.inputs) {
    const Value& v = plan.values[in];
    if (v.planes == 1) samplers.push_back({{"name", "in_" + v.name}, {"value", in}, {"plane", 0}});
    for (int p = 0; v.planes > 1 && p < v.planes; ++p)
      samplers.push_back({{"name", fmt::format("in_{}_p{}", v.name, p)}, {"value", in}, {"plane", p}});
  }
  // render target j * P + p for plane p of output j (the order of the fragment shader's out locations)
  json targets = json::array();
  int location = 0;
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const Value& v = plan.values[k.outputs[j]];
    for (int p = 0; p < v.planes; ++p)
      targets.push_back({{"location", location++}, {"value", v.id}, {"plane", p}, {"block", k.block_of(j)}});
  }
  return {{"name", k.name},
          {"glsl_es", shader_dir + "/" + k.name + ".frag"},
          {"extent", {k.extent.width, k.extent.height}},
          {"blocks", k.blocks()},
          {"samplers", samplers},
          {"render_targets", targets},
          {"nodes", records::kernel_nodes(plan, k)}};
}

}  // namespace

json describe_program(const Plan& plan, const std::string& shader_dir) {
  json values = json::array();
  for (const Value& v : plan.values) values.push_back(value_json(plan, v));
  json buffers = json::array();
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    buffers.push_back({{"layout", layout_json(plan.buffers[b])},
                       {"allocated", {plan.buffer_extents[b].width, plan.buffer_extents[b].height}}});
  json kernels = json::array();
  for (const Kernel& k : plan.kernels) kernels.push_back(kernel_json(plan, k, shader_dir));
  json j = records::program_interface(plan);
  j["values"] = values;
  j["buffers"] = buffers;
  j["kernels"] = kernels;
  j["peak_bytes"] = plan.peak_bytes;
  return j;
}

}  // namespace sg::web
