// What every stage emitter writes the same way (see emit_common.h).
#include "emit_common.h"

#include <fmt/format.h>

namespace sg::glsl {

KernelOutputs kernel_outputs(const Plan& plan, const Kernel& k) {
  const size_t nout = k.exprs.size();  // render targets: one per output, or per row plane of the output
  KernelOutputs r;
  for (int o : k.outputs) {
    const Value& ov = plan.values[o];
    for (int p = 0; p < ov.planes; ++p) {
      r.base.push_back(ov.planes > 1 ? fmt::format("{}_p{}", ov.name, p) : ov.name);
      r.name.push_back(nout == 1 ? std::string("out_texel") : "out_" + r.base.back());
      r.desc.push_back(ov.col_planes > 1
                           ? fmt::format("{}: rows {} mod {}, texels {} mod {} of each row, of {}", ov.name,
                                         p / ov.col_planes, ov.row_planes(), p % ov.col_planes, ov.col_planes,
                                         shape_str(ov.node->shape))
                       : ov.planes > 1 ? fmt::format("{}: rows {} mod {} of {}", ov.name, p, ov.planes, shape_str(ov.node->shape))
                                       : shape_str(ov.node->shape));
    }
  }
  return r;
}

std::vector<std::vector<size_t>> block_outputs(const Kernel& k) {
  std::vector<std::vector<size_t>> b(k.blocks());
  for (size_t j = 0; j < k.outputs.size(); ++j) b[k.block_of(j)].push_back(j);
  return b;
}

Kernel block_kernel(const Kernel& k, const std::vector<size_t>& outputs) {
  Kernel sub;
  sub.name = k.name;
  sub.inputs = k.inputs;
  for (size_t j : outputs) {
    sub.outputs.push_back(k.outputs[j]);
    sub.exprs.push_back(k.exprs[j]);
  }
  return sub;
}

std::string kernel_comment(const Plan& plan, const Kernel& k, const std::string& title,
                           const std::function<std::string(size_t, const Value&)>& output_tail, const std::string& extra) {
  std::string s = "// " + title + "\n";
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const Value& out = plan.values[k.outputs[j]];
    const int ni = plan.node_index(out.node.get());
    std::string label = out.node->label();
    if (label.size() > 40) label = label.substr(0, 40) + "...";
    s += fmt::format("// output {}{}{}: {}{}\n", k.outputs.size() > 1 ? fmt::format("{} ", j) : std::string(), out.name,
                     ni >= 0 ? fmt::format(" = n{} {}", ni, label) : std::string(), shape_str(out.node->shape),
                     output_tail(j, out));
  }
  return s + extra + k.notes + "// graph nodes computed here (node, op, shape, user source):\n" + k.comment;
}

std::string kernel_header(const Plan& plan, const Kernel& k, ShaderStage stage,
                          const std::function<std::string(const Value&)>& storage, const std::string& union_note) {
  auto tail = [&](size_t j, const Value& out) {
    const std::string layout =
        out.transposed ? ", stored transposed (rows are read in loops)"
        : out.col_planes > 1
            ? fmt::format(", in {0}x{1} planes: element (r, c) in plane (r % {0}) * {1} + (c / 4) % {1}; per plane",
                          out.row_planes(), out.col_planes)
        : out.planes > 1 ? fmt::format(", in {0} row planes: row r in plane r % {0}; per plane", out.planes)
                         : std::string();
    return fmt::format("{} ({} elements{}{})", layout, out.layout.numel, storage(out),
                       k.blocks() > 1 ? fmt::format(", block {}", k.block_of(j)) : std::string());
  };
  const std::string title = fmt::format("shadergrad kernel {} ({} stage)", k.name, stage_name(stage));
  return "#version 450\n" + kernel_comment(plan, k, title, tail, k.blocks() > 1 ? union_note : std::string());
}

std::string plane_locate(const Value& v) {
  const int P = v.planes;
  const int64_t C = v.node->shape.back();
  const int Pc = v.col_planes, Pr = v.row_planes();
  return Pc > 1 ? fmt::format("  int e = max(i, 0);\n  int r = e / {0};  // row of [rows, {0}]\n  int c = e - r * {0};  // its "
                              "column: texel c >> 2 of the row is in plane (r % {1}) * {2} + (c >> 2) % {2}\n"
                              "  int j = (r / {1}) * {3} + ((c >> 2) / {2}) * 4 + (c & 3);\n  int p = (r % {1}) * {2} + (c >> 2) % {2};\n",
                              C, Pr, Pc, C / Pc)
                : fmt::format("  int e = max(i, 0);\n  int r = e / {0};  // row of [rows, {0}]: plane r % {1}, its row r / {1}\n"
                              "  int j = (r / {1}) * {0} + (e - r * {0});\n  int p = r % {1};\n", C, P);
}

std::string component_helper(const std::string& loads) {
  if (loads.find("sg_component(") == std::string::npos) return "";
  return "float sg_component(vec4 v, int c) {  // component c of v: its bits under a mask, no select, no indexing\n"
         "  uvec4 b = floatBitsToUint(v) & (uvec4(0u) - uvec4(equal(ivec4(c), ivec4(0, 1, 2, 3))));\n"
         "  return uintBitsToFloat((b.x | b.y) | (b.z | b.w));\n}\n";
}

}  // namespace sg::glsl
