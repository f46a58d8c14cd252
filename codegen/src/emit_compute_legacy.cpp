// The per-element compute emitter kept from before the buffer-storage compute emitter (emit_compute.cpp,
// sg/compute_kernel.h): emit_glsl450(plan, k, ShaderStage::Compute) still writes it, for `shadergrad dump --target
// glsl-es-compute` over fragment plans. One invocation per element; inputs and outputs as std430 float SSBOs; values
// with planes read plane by plane (the fragment target's storage, emulated). Delete this file and the Compute case
// of emit_glsl450 (emit.cpp) once the new emitter serves every compute caller.
#include "emit_stages.h"

#include "emit_common.h"
#include "glsl_expr.h"

namespace sg {

namespace {

using glsl::BlockSource;
using glsl::ExprEmitter;
using glsl::indent2;

/// One domain block: scalar code for element `elem`, writing output buffer j as out_<obase[j]>.
BlockSource emit_block(const Plan& plan, const Kernel& k, const std::vector<std::string>& obase, bool in_union) {
  const Value& out = plan.values[k.output()];  // all outputs share its layout and iteration domain
  const Shape shape = out.stored_shape();
  const int Pc = out.col_planes;
  const std::string last_var = shape.empty() ? std::string() : fmt::format("i{}", shape.size() - 1);
  ExprEmitter em(plan, k);
  std::string coords;
  Shape st = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string q = st[i] == 1 ? "elem" : fmt::format("(elem / {})", st[i]);
    std::string v = i == 0 ? q : fmt::format("{} % {}", q, shape[i]);
    coords += fmt::format("{}int i{} = {};\n", std::string(em.indent_ * 2, ' '), i, v);
  }
  if (Pc > 1)
    coords += fmt::format("{0}int {1} = {2} * ({3} - {3} % 4) + {3} % 4;  // column in column plane 0 (+ 4 q in plane q)\n",
                          std::string(em.indent_ * 2, ' '), kColumnVar, Pc, last_var);
  em.fuse_sibling_loops(k.exprs);
  std::vector<ExprEmitter::Code> values;
  for (auto& e : k.exprs) values.push_back(em.emit(e));
  BlockSource bs;
  bs.texel_loads = em.texel_loads_;
  bs.uses_pow = em.uses_pow_;
  std::string rest = coords + em.body_;
  for (size_t j = 0; j < k.exprs.size(); ++j) rest += fmt::format("  out_{}.data[elem] = {};\n", obase[j], values[j].s);
  if (!in_union)
    bs.main = fmt::format("  if (elem >= {}) return;\n", out.layout.numel) + rest;
  else
    bs.main = fmt::format("  if (elem < {}) {{\n", out.layout.numel) + indent2(rest) + "  }\n";
  return bs;
}

/// Buffer declarations and load_/load4_ functions of k's inputs; returns the next free binding.
int declare_inputs(const Plan& plan, const Kernel& k, const std::set<std::string>& texel_loads, std::string& decls,
                   std::string& loads) {
  int binding = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Value& v = plan.values[k.inputs[i]];
    std::string desc = fmt::format("{} {}", v.name, shape_str(v.node->shape));
    if (v.planes > 1) {
      const int P = v.planes, Pc = v.col_planes, Pr = v.row_planes();
      for (int p = 0; p < P; ++p) {
        const std::string which = Pc > 1 ? fmt::format("rows {} mod {}, texels {} mod {} of each row", p / Pc, Pr, p % Pc, Pc)
                                         : fmt::format("rows {} mod {}", p, P);
        decls += fmt::format("layout(std430, set = 0, binding = {}) readonly buffer buf_{}_p{} {{ float data[]; }} in_{}_p{};  // {}: {}\n",
                             binding++, v.name, p, v.name, p, desc, which);
      }
      std::string pick;
      for (int p = 0; p < P; ++p)
        pick += fmt::format("  {}return in_{}_p{}.data[j];\n", p + 1 < P ? fmt::format("if (p == {}) ", p) : "", v.name, p);
      loads += fmt::format("float load_{}(int i) {{\n{}{}}}\n", v.name, glsl::plane_locate(v), pick);
      if (texel_loads.count(v.name))
        loads += fmt::format("vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4\n"
                             "  return vec4(load_{0}(i), load_{0}(i + 1), load_{0}(i + 2), load_{0}(i + 3));\n}}\n",
                             v.name);
      continue;
    }
    decls += fmt::format("layout(std430, set = 0, binding = {0}) readonly buffer buf_{1} {{ float data[]; }} in_{1};  // {2}\n",
                         binding++, v.name, desc);
    loads += fmt::format("float load_{0}(int i) {{ return in_{0}.data[max(i, 0)]; }}\n", v.name);
    if (texel_loads.count(v.name))  // indices clamped into the buffer (texel-shared loads are whole-texel aligned)
      loads += fmt::format("vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4\n  int b = clamp(i, 0, {1});\n"
                           "  return vec4(in_{0}.data[b], in_{0}.data[min(b + 1, {1})], in_{0}.data[min(b + 2, {1})], "
                           "in_{0}.data[min(b + 3, {1})]);\n}}\n",
                           v.name, std::max<int64_t>(v.node->numel() - 1, 0));
  }
  return binding;
}

}  // namespace

std::string emit_compute_legacy(const Plan& plan, const Kernel& k) {
  const size_t nout = k.exprs.size();
  const int nblocks = k.blocks();
  const glsl::KernelOutputs outs = glsl::kernel_outputs(plan, k);
  const auto block_outputs = glsl::block_outputs(k);
  std::vector<BlockSource> blocks;
  if (nblocks == 1) {
    blocks.push_back(emit_block(plan, k, outs.base, false));
  } else {
    for (int b = 0; b < nblocks; ++b) {
      std::vector<std::string> bases;
      for (size_t j : block_outputs[b]) bases.push_back(outs.base[j]);
      blocks.push_back(emit_block(plan, glsl::block_kernel(k, block_outputs[b]), bases, true));
    }
  }
  std::set<std::string> texel_loads;
  bool uses_pow = false;
  for (auto& b : blocks) {
    texel_loads.insert(b.texel_loads.begin(), b.texel_loads.end());
    uses_pow |= b.uses_pow;
  }
  const std::string union_note = fmt::format("// union-domain kernel: {} blocks of different domains; each block computes the "
                                             "invocations below its own element count\n", k.blocks());
  std::string src = glsl::kernel_header(plan, k, ShaderStage::Compute, [](const Value&) { return std::string(); }, union_note);
  std::string decls, loads;
  const int binding = declare_inputs(plan, k, texel_loads, decls, loads);
  src += fmt::format("layout(local_size_x = {}) in;\n", kComputeWorkgroupSize) + decls;
  for (size_t j = 0; j < nout; ++j)
    src += fmt::format("layout(std430, set = 0, binding = {}) writeonly buffer buf_out{} {{ float data[]; }} out_{};\n",
                       binding + static_cast<int>(j), nout == 1 ? std::string() : std::to_string(j), outs.base[j]);
  src += "\n";
  src += glsl::component_helper(loads);
  src += loads;
  if (uses_pow) src += glsl::pow_helper(false);
  src += "\nvoid main() {\n";
  src += fmt::format("  int elem = int(gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * {}u) + gl_GlobalInvocationID.x);\n",
                     kComputeWorkgroupSize);
  if (nblocks == 1) {
    src += blocks[0].main;
  } else {
    for (int b = 0; b < nblocks; ++b) {
      const Value& first = plan.values[k.outputs[block_outputs[b].front()]];
      std::string names;
      for (size_t j : block_outputs[b]) names += (names.empty() ? "" : ", ") + plan.values[k.outputs[j]].name;
      src += fmt::format("  // block {}: {} over {} ({} elements, texture {}x{})\n", b, names,
                         shape_str(first.stored_shape()), first.layout.numel, first.layout.width, first.layout.height);
      src += "  {\n" + indent2(indent2(blocks[b].mode) + blocks[b].main) + "  }\n";
    }
  }
  src += "}\n";
  return src;
}

}  // namespace sg
