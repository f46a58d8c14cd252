// plan.json: Plan::to_json (kernels in launch order with their inputs, outputs, layouts and graph nodes).
#include "sg/schedule.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sg {

nlohmann::json Plan::to_json() const {
  using nlohmann::json;
  auto kind_name = [](ValueKind k) {
    switch (k) {
      case ValueKind::Input: return "input";
      case ValueKind::Persistent: return "persistent";
      case ValueKind::Constant: return "constant";
      case ValueKind::Temp: return "temp";
    }
    return "?";
  };
  auto value_json = [&](int id) {
    const Value& v = values[id];
    json j = {{"value", v.id}, {"name", v.name}, {"kind", kind_name(v.kind)}, {"shape", json(std::vector<int64_t>(v.node->shape.begin(), v.node->shape.end()))},
              {"numel", v.layout.numel}, {"texture", {v.layout.width, v.layout.height}}};
    if (v.buffer >= 0) j["buffer"] = v.buffer;
    if (v.update_of >= 0) j["update_of"] = values[v.update_of].name;
    if (v.transposed) j["stored_transposed"] = true;
    if (v.planes > 1) {
      // "numel" and "texture" are one plane's; row r of the [rows, C] view of the tensor is in plane r % planes
      // (with column planes: element (r, c) in plane (r % row_planes) * col_planes + (c / 4) % col_planes)
      j["row_planes"] = v.row_planes();
      if (v.col_planes > 1) j["col_planes"] = v.col_planes;
      j["tensor_numel"] = v.node->numel();
      if (!v.plane_buffers.empty()) j["plane_buffers"] = v.plane_buffers;
    }
    if (v.extent.width != v.layout.width || v.extent.height != v.layout.height)
      j["allocated"] = {v.extent.width, v.extent.height};  // larger than its layout: written by a union-domain draw
    return j;
  };
  json ks = json::array();
  for (auto& k : kernels) {
    json ins = json::array();
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      json j = value_json(k.inputs[i]);
      const Value& v = values[k.inputs[i]];
      if (v.planes == 1) {
        j["sampler"] = "in_" + v.name;
      } else {  // one sampler per row plane
        j["samplers"] = json::array();
        for (int p = 0; p < v.planes; ++p) j["samplers"].push_back(fmt::format("in_{}_p{}", v.name, p));
      }
      ins.push_back(j);
    }
    json nodes = json::array();
    for (auto& n : k.nodes)
      nodes.push_back({{"node", node_index(n.get())}, {"op", n->label()}, {"shape", shape_str(n->shape)},
                       {"source", n->loc.known() ? n->loc.str() : ""}});
    json outs = json::array();
    for (size_t j = 0, target = 0; j < k.outputs.size(); ++j) {
      json o = value_json(k.outputs[j]);
      const int planes = values[k.outputs[j]].planes;
      if (planes > 1) {
        o["render_targets"] = json::array();
        for (int p = 0; p < planes; ++p) o["render_targets"].push_back(target++);
      } else {
        o["render_target"] = target++;
      }
      if (k.blocks() > 1) o["block"] = k.block_of(j);
      outs.push_back(o);
    }
    ks.push_back({{"name", k.name}, {"extent", {k.extent.width, k.extent.height}}, {"blocks", k.blocks()},
                  {"outputs", outs}, {"inputs", ins}, {"nodes", nodes}});
  }
  json outs = json::array();
  for (size_t i = 0; i < output_values.size(); ++i)
    outs.push_back({{"name", program.output_names[i]}, {"value", values[output_values[i]].name}});
  json ups = json::array();
  for (auto& [t, v] : updates) ups.push_back({{"target", values[t].name}, {"value", values[v].name}});
  return {{"format", "shadergrad-plan/1"}, {"kernels", ks}, {"outputs", outs}, {"updates", ups},
          {"buffers", buffers.size()}, {"peak_bytes", peak_bytes}};
}

}  // namespace sg
