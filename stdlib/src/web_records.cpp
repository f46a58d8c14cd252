// The records the webgl2 and webgpu plans of a bundle program share (web_records.h).
#include "web_records.h"

#include "sg/feeds.h"

namespace sg::web::records {

using nlohmann::json;

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

json value(const Plan& plan, const Value& v) {
  json j = {{"id", v.id},
            {"name", v.name},
            {"kind", kind_name(v.kind)},
            {"op", v.node->label()},
            {"node", plan.node_index(v.node.get())},
            {"shape", shape_json(*v.node)},
            {"dtype", dtype_name(v.node->dtype)}};
  if (v.node->loc.known()) j["source"] = v.node->loc.str();
  if (v.kind == ValueKind::Persistent || v.kind == ValueKind::Input) j["tensor"] = v.node->name;
  if (v.kind == ValueKind::Temp) {
    if (v.update_of >= 0) j["update_of"] = plan.values[v.update_of].node->name;
    else if (v.buffer >= 0) j["buffer"] = v.buffer;
  }
  return j;
}

json kernel_nodes(const Plan& plan, const Kernel& k) {
  json nodes = json::array();
  for (const NodePtr& n : k.nodes)
    nodes.push_back({{"node", plan.node_index(n.get())}, {"op", n->label()}, {"shape", shape_str(n->shape)},
                     {"source", n->loc.known() ? n->loc.str() : ""}});
  return nodes;
}

json program_interface(const Plan& plan) {
  const FeedChecker checker(plan.program);  // which inputs are class indices (one_hot/cross_entropy labels)
  json inputs = json::array();
  for (const Value& v : plan.values)
    if (v.kind == ValueKind::Input) {
      inputs.push_back({{"name", v.node->name}, {"value", v.id}, {"shape", shape_json(*v.node)},
                        {"dtype", dtype_name(v.node->dtype)}});
      if (int64_t c = checker.classes_of(*v.node); c > 0) inputs.back()["classes"] = c;  // runtime/web/feeds.js
      if (std::string by = checker.bound_by(*v.node); !by.empty()) inputs.back()["index_of"] = by;  // "gather at f:l"
    }
  json outputs = json::array();
  for (size_t i = 0; i < plan.output_values.size(); ++i) {
    const Value& v = plan.values[plan.output_values[i]];
    outputs.push_back({{"name", plan.program.output_names[i]}, {"value", v.id}, {"shape", shape_json(*v.node)},
                       {"dtype", dtype_name(v.node->dtype)}});
  }
  json updates = json::array();
  for (auto& [target, val] : plan.updates)
    updates.push_back({{"target", plan.values[target].node->name}, {"target_value", target}, {"value", val}});
  return {{"inputs", inputs}, {"outputs", outputs}, {"updates", updates}};
}

}  // namespace sg::web::records
