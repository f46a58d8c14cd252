// Buffer-storage compute emitter, union-domain kernels (strategy "union-blocks"): a kernel of several domain blocks
// (ScheduleOptions::union_invocation_blocks: small independent fusion groups such as the optimizer updates of biases
// and small layers) as one dispatch whose workgroups are partitioned among the blocks.
//
// Block b owns the workgroups [first_b, first_b + ceil(n_b / local)) of the flat workgroup index (x + y * grid_x),
// n_b being its domain's element count; each of its invocations computes one element of its domain, every output of
// the block at that element (its own coordinates i0.. and its own scope, printed by a KPrinter of its own), each
// store guarded. A workgroup belongs to exactly one block, so control flow is uniform per workgroup (no divergence
// between blocks within a workgroup, no barrier anywhere). Every block is commented with the graph nodes it
// computes and their user source lines (Kernel::comment, from build_kernels). On the cpu plan
// (ComputeLimits::register_tiles) a block whose reductions are the same for a block of its elements (a max-pool
// gradient's argmax) runs one invocation per such block (window_blocks.cpp).
// Invariants: the bindings, load functions and helpers are those of a one-block kernel (inputs, then outputs);
// the source is a function of (plan, kernel, limits, language) only.
#include <algorithm>

#include <fmt/format.h>

#include "compute_emit.h"
#include "compute_glsl.h"
#include "sg/compute_kernel.h"

namespace sg::compute {

namespace {

/// The comment lines of block b in the kernel's comment ("// block b (...)" up to the next block's line).
std::string block_comment(const Kernel& k, int b, int indent) {
  const std::string head = fmt::format("// block {} ", b);
  const size_t at = k.comment.find(head);
  if (at == std::string::npos) return "";
  const size_t end = k.comment.find("// block ", at + head.size());
  const std::string part = k.comment.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::string s;
  size_t pos = 0;
  while (pos < part.size()) {
    const size_t nl = part.find('\n', pos);
    s += std::string(indent * 2, ' ') + part.substr(pos, nl - pos) + "\n";
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return s;
}

}  // namespace

ComputeKernel emit_union_blocks(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang) {
  const int local = std::min(64, limits.max_workgroup_invocations);
  const int nb = k.blocks();
  // per block: its outputs (contiguous), its element count and its first workgroup
  std::vector<std::vector<size_t>> outs(static_cast<size_t>(nb));
  for (size_t j = 0; j < k.outputs.size(); ++j) outs[static_cast<size_t>(k.block_of(j))].push_back(j);
  std::vector<int64_t> count(static_cast<size_t>(nb)), first(static_cast<size_t>(nb) + 1, 0);
  std::vector<std::optional<WindowBlocking>> blocking(static_cast<size_t>(nb));  // the cpu plan: window blocks
  for (int b = 0; b < nb; ++b) {
    std::vector<KExprPtr> exprs;
    for (size_t j : outs[b]) exprs.push_back(k.exprs[j]);
    if (limits.register_tiles) blocking[b] = window_blocking(exprs, plan.values[k.outputs[outs[b].front()]].stored_shape());
    count[b] = blocking[b] ? sg::numel(blocking[b]->grid)
                           : std::max<int64_t>(plan.values[k.outputs[outs[b].front()]].node->numel(), 1);
    first[b + 1] = first[b] + (count[b] + local - 1) / local;
  }
  ComputeKernel ck;
  ck.strategy = "union-blocks";
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = grid_for(k, first[nb], limits);
  std::set<int> loaded;
  MathHelpers helpers;
  std::string body = "  " + lang.let(LType::Int, "wg",
                                     fmt::format("{} * {} + {}", lang.builtin(Builtin::WorkgroupId, 1), ck.workgroups[0],
                                                 lang.builtin(Builtin::WorkgroupId, 0))) + "\n";
  body += "  " + lang.let(LType::Int, "lane", lang.builtin(Builtin::LocalInvocationId, 0)) + "\n";
  for (int b = 0; b < nb; ++b) {
    const Value& fv = plan.values[k.outputs[outs[b].front()]];
    std::vector<KExprPtr> exprs;
    for (size_t j : outs[b]) exprs.push_back(k.exprs[j]);
    const std::optional<WindowBlocking>& wb = blocking[b];
    KPrinter p(plan, k, wb ? wb->all_exprs() : exprs, fmt::format("b{}_", b), lang);
    p.indent = 3;
    body += block_comment(k, b, 1);
    if (wb) body += fmt::format("  // {}\n", window_block_note(*wb));
    body += fmt::format("  if (wg >= {} && wg < {}) {{  // block {}: workgroups {}..{}, {} {}\n", first[b], first[b + 1], b,
                        first[b], first[b + 1] - 1, count[b], wb ? "blocks" : "elements");
    body += "    " + lang.let(LType::Int, "elem", fmt::format("(wg - {}) * {} + lane", first[b], local)) + "\n";
    body += fmt::format("    if (elem < {}) {{\n", wb ? count[b] : fv.node->numel());
    if (wb) {
      std::vector<std::string> names;
      for (size_t j : outs[b]) names.push_back(plan.values[k.outputs[j]].name);
      body += window_block_code(*wb, fv.stored_shape(), names, p, 3, fmt::format("b{}_", b), lang);
    } else {
      std::vector<std::string> values;
      for (auto& e : exprs) values.push_back(p.print(e));
      body += coordinates(fv.stored_shape(), "elem", 3, lang) + p.take_code();
      for (size_t i = 0; i < outs[b].size(); ++i)
        body += "      " + lang.store(plan.values[k.outputs[outs[b][i]]].name, "elem", values[i]) + "\n";
    }
    body += "    }\n  }\n";
    loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
    helpers |= p.helpers();
  }
  body += "}\n";
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  src += fmt::format("// {} domain blocks, each one invocation per element of its domain in workgroups of its own: {} x {} "
                     "workgroups of {}\n",
                     nb, ck.workgroups[0], ck.workgroups[1], local);
  src += lang.workgroup_size_layout(local, 1);
  // WGSL on a CPU implementation (register_tiles): loads unclamped, as in the per-element kernels (every index is in
  // range or its value masked; WGSL bounds every storage access)
  src += buffer_declarations(plan, k, loaded, lang, !(lang.wgsl() && limits.register_tiles));
  src += lang.helpers(helpers, body);
  src += lang.entry_open(local, 1, body) + body;
  ck.source = std::move(src);
  ck.language = lang.language();
  return ck;
}

}  // namespace sg::compute
