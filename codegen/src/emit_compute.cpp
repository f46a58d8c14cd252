// Buffer-storage compute emitter: kernel IR -> compute kernels in GLSL 4.50 (Vulkan flavour, std430 storage buffers),
// WGSL (WebGPU storage buffers) or C11 (the cpu-simd target: the cpu plan only, each kernel a set of static functions
// and an exported entry point running a range of workgroups, Lang::c_entry), written once over the language layer of
// compute_lang.h.
//
// Strategies, first match wins (ComputeKernel::strategy):
//  - "tree-reduction" (emit_tiled.cpp): few outputs (<= 1024), each a long reduction (>= 128 iterations and at least
//    as many as outputs: row sums, bias gradients, the loss mean, a tiny conv weight gradient; on GPUs also <= 8192
//    outputs of >= 512 iterations: a conv weight gradient of a few thousand outputs): one workgroup per
//    output element, a strided loop per invocation and a tree in shared memory.
//  - "tiled-contraction" (emit_tiled.cpp, analysis in contraction.cpp): a kernel whose value is a sum over r of
//    (factor of some output coordinates M and r) x (factor of the other output coordinates N and r): matmul, x.W^T,
//    x^T.dh, conv2d forward and both gradients in their lowered form. Shared-memory tiles, register blocking,
//    the epilogue on the register tile.
//  - "register-tiled" (emit_regtile.cpp), instead of the two above where ComputeLimits::register_tiles (CPU
//    implementations of WebGPU): a contraction as a small register tile per invocation over the whole K, factors
//    read from the buffers, no workgroup memory and no barriers; other reductions per element.
//  - "subgroup-rows" (emit_tiled.cpp; GLSL on GPUs with subgroup arithmetic), instead of per-element for kernels of
//    fewer elements than 256 per compute unit whose reductions reach 32 iterations (LayerNorm's row statistics): one
//    subgroup per element, each reduction strided over the lanes and combined by a subgroup operation.
//  - "union-blocks" (emit_union.cpp), a kernel of several domain blocks (union_invocation_blocks): the dispatch's
//    workgroups partitioned among the blocks, one invocation per element of its block.
//  - "window-blocks" (window_blocks.cpp; the cpu plan, ComputeLimits::register_tiles), instead of per-element where
//    a reduction is the same for a block of elements (a max-pool gradient's argmax per window): one invocation per
//    block. The union-blocks kernels of the cpu plan block their domain blocks the same way.
//  - "per-element" (here): one invocation per output element, every output stored, each store guarded; a 2-D
//    grid of workgroups when one dimension would exceed the device's max_workgroup_count.
// Invariants: binding b < inputs.size() is kernel.inputs[b] (readonly), then outputs (writeonly), all in set 0;
// no push constants; every load index is clamped into its buffer (WGSL on a CPU implementation: WGSL bounds it); the
// source is a function of (plan, kernel, limits, language) only (byte-stable); both languages get the same strategy, workgroups, bindings and shared memory.
// A contraction whose tiles do not fit the device (workgroup memory, invocations, grid) prints per-element with a
// header line saying which limit.
#include <algorithm>

#include <fmt/format.h>

#include "compute_emit.h"
#include "compute_glsl.h"
#include "contraction.h"
#include "emit_common.h"
#include "sg/compute_kernel.h"
#include "sg/error.h"

namespace sg {

namespace compute {

std::string kernel_header(const Plan& plan, const Kernel& k, const std::string& strategy, const Lang& lang) {
  auto tail = [](size_t, const Value& out) { return fmt::format(" ({} elements)", out.node->numel()); };
  return lang.version_line() +
         glsl::kernel_comment(plan, k, fmt::format("shadergrad compute kernel {} ({})", k.name, strategy), tail, "");
}

std::string buffer_declarations(const Plan& plan, const Kernel& k, const std::set<int>& loaded, const Lang& lang,
                                bool clamped, const std::set<int>* unclamped) {
  std::string s = lang.wgsl() ? "// bindings (group 0): the kernel's inputs, then its outputs; f32 storage buffers, row-major\n"
                  : lang.c()  ? "// bindings (sg->buf[b]): the kernel's inputs, then its outputs; float arrays, row-major\n"
                              : "// bindings (set 0): the kernel's inputs, then its outputs; std430 float buffers, row-major\n";
  int binding = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Value& v = plan.values[k.inputs[i]];
    s += lang.buffer_binding(binding++, v.name, true, fmt::format("{} {}", v.name, shape_str(v.node->shape)));
  }
  for (int o : k.outputs) {
    const Value& v = plan.values[o];
    s += lang.buffer_binding(binding++, v.name, false, shape_str(v.node->shape));
  }
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (!loaded.count(static_cast<int>(i))) continue;
    const Value& v = plan.values[k.inputs[i]];
    s += lang.load_function(v.name, std::max<int64_t>(v.node->numel() - 1, 0), clamped);
  }
  if (unclamped && lang.c())
    for (int i : *unclamped) {
      const Value& v = plan.values[k.inputs[static_cast<size_t>(i)]];
      s += lang.load_function(v.name, std::max<int64_t>(v.node->numel() - 1, 0), false);
    }
  return s;
}

std::string coordinates(const Shape& shape, const std::string& flat, int indent, const Lang& lang,
                        const std::string& last_suffix) {
  const Shape st = contiguous_strides(shape);
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string q = st[i] == 1 ? flat : lang.div_const(flat, st[i]);
    const std::string name = fmt::format("i{}{}", i, i + 1 == shape.size() ? last_suffix : "");
    s += std::string(indent * 2, ' ') + lang.let(LType::Int, name, i == 0 ? q : lang.mod_const(q, shape[i])) + "\n";
  }
  return s;
}

std::array<uint32_t, 3> grid_for(const Kernel& k, int64_t groups, const ComputeLimits& limits) {
  groups = std::max<int64_t>(groups, 1);
  const int64_t gx = std::min(groups, limits.max_workgroup_count);
  const int64_t gy = (groups + gx - 1) / gx;
  if (gy > limits.max_workgroup_count)
    throw UnsupportedError(fmt::format("kernel {}: {} workgroups exceed the device's max_workgroup_count {} x {}", k.name,
                                       groups, limits.max_workgroup_count, limits.max_workgroup_count));
  return {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 1};
}

namespace {

/// The first lines of a kernel of one invocation per element (or per block of elements): `name` (`elem`), the
/// invocation's flat index over the 2-D grid of `local`-wide workgroups, and the return of invocations past `count`.
std::string element_prologue(const ComputeKernel& ck, int local, int64_t count, const Lang& lang,
                             const std::string& name = "elem") {
  const std::string elem = fmt::format("{} * {} + {}", lang.builtin(Builtin::WorkgroupId, 1),
                                       static_cast<int64_t>(ck.workgroups[0]) * local,
                                       lang.builtin(Builtin::GlobalInvocationId, 0));
  return "  " + lang.let(LType::Int, name, elem) + "\n" + "  " +
         lang.if_then(fmt::format("{} >= {}", name, count), "return;") + "\n";
}

/// Workgroups a dispatch of runs keeps at least (of `local` invocations): the runs leave a CPU implementation's
/// threads whole workgroups to share.
constexpr int64_t kMinRunWorkgroups = 64;

/// Consecutive elements per invocation of per-element kernel `k` over `shape` (ComputeLimits::element_run): the
/// run where the innermost extent is a multiple of it, no expression has a loop (an invocation with a reduction
/// already does enough work to hide its own overhead) and the runs still fill kMinRunWorkgroups workgroups; else 1.
int element_run(const Kernel& k, const Shape& shape, const ComputeLimits& limits, int local) {
  const int run = limits.element_run;
  if (run <= 1 || shape.empty() || shape.back() % run != 0) return 1;
  if (sg::numel(shape) / run < kMinRunWorkgroups * local) return 1;
  for (const KExprPtr& e : k.exprs)
    if (kcontains_reduce(e)) return 1;
  return run;
}

/// The body of a per-element kernel computing `run` consecutive elements per invocation: the coordinates of the
/// run's first element (`elem0`; the innermost as i<last>_0), then per element a block binding `elem` and the
/// innermost coordinate and repeating the printed code `code` and `stores` (written for `elem` and i0..).
std::string element_run_body(const Shape& shape, int run, const std::string& code, const std::string& stores,
                             const Lang& lang) {
  const std::string last = fmt::format("i{}", shape.size() - 1);
  std::string body = "  " + lang.let(LType::Int, "elem0", fmt::format("run * {}", run)) + "\n" +
                     coordinates(shape, "elem0", 1, lang, "_0");
  for (int c = 0; c < run; ++c)
    body += fmt::format("  {{\n    {}\n    {}\n", lang.let(LType::Int, last, fmt::format("{}_0 + {}", last, c)),
                        lang.let(LType::Int, "elem", fmt::format("elem0 + {}", c))) +
            code + stores + "  }\n";
  return body;
}

/// The cpu plan's per-element kernel as window blocks (window_blocks.cpp): one invocation per block of elements
/// whose reductions (a max-pool gradient's argmax) are the same, or nullopt where none applies.
std::optional<ComputeKernel> emit_window_blocks(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                const Lang& lang, const std::string& not_tiled) {
  const Value& out = plan.values[k.output()];
  const Shape shape = out.stored_shape();
  const auto wb = window_blocking(k.exprs, shape);
  if (!wb) return std::nullopt;
  const int64_t n = std::max<int64_t>(sg::numel(wb->grid), 1);
  const int local = std::min(64, limits.max_workgroup_invocations);
  ComputeKernel ck;
  ck.strategy = "window-blocks";
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = grid_for(k, (n + local - 1) / local, limits);
  KPrinter p(plan, k, wb->all_exprs(), "", lang);
  p.indent = 1;
  std::vector<std::string> names;
  for (int o : k.outputs) names.push_back(plan.values[o].name);
  std::string body = element_prologue(ck, local, n, lang);
  body += window_block_code(*wb, shape, names, p, 1, "", lang) + "}\n";
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  if (!not_tiled.empty()) src += fmt::format("// {}; window blocks instead\n", not_tiled);
  src += fmt::format("// {}\n// {} blocks of {} ({} elements): {} x {} workgroups of {}\n", window_block_note(*wb), n,
                     out.name, out.node->numel(), ck.workgroups[0], ck.workgroups[1], local);
  src += lang.workgroup_size_layout(local, 1);
  src += buffer_declarations(plan, k, p.loaded_inputs(), lang, !lang.wgsl());  // WGSL bounds every access
  src += lang.helpers(p.helpers(), body);
  src += lang.entry_open(local, 1, body) + body;
  ck.source = std::move(src);
  ck.language = lang.language();
  return ck;
}

}  // namespace

/// One invocation per output element.
ComputeKernel emit_per_element(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang,
                               const std::string& not_tiled) {
  if (limits.register_tiles)  // the cpu plan
    if (auto w = emit_window_blocks(plan, k, limits, lang, not_tiled)) return std::move(*w);
  const Value& out = plan.values[k.output()];
  const int64_t n = std::max<int64_t>(out.node->numel(), 1);
  const int local = limits.register_tiles ? cpu_plan_workgroup_size(n, 1, limits) : std::min(64, limits.max_workgroup_invocations);
  const int run = element_run(k, out.stored_shape(), limits, local);
  ComputeKernel ck;
  ck.strategy = "per-element";
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = grid_for(k, (n / run + local - 1) / local, limits);
  KPrinter p(plan, k, k.exprs, "", lang);
  p.indent = run > 1 ? 2 : 1;
  std::vector<std::string> values;
  for (auto& e : k.exprs) values.push_back(p.print(e));
  std::string stores;
  for (size_t j = 0; j < k.outputs.size(); ++j)
    stores += std::string(2 * p.indent, ' ') + lang.store(plan.values[k.outputs[j]].name, "elem", values[j]) + "\n";
  std::string body;
  if (run == 1)
    body = element_prologue(ck, local, out.node->numel(), lang) + coordinates(out.stored_shape(), "elem", 1, lang) +
           p.take_code() + stores;
  else
    body = element_prologue(ck, local, n / run, lang, "run") +
           element_run_body(out.stored_shape(), run, p.take_code(), stores, lang);
  body += "}\n";
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  if (!not_tiled.empty()) src += fmt::format("// {}; one invocation per element instead\n", not_tiled);
  const std::string per = run == 1 ? "element" : fmt::format("run of {} consecutive elements", run);
  src += fmt::format("// one invocation per {} of {} ({} elements): {} x {} workgroups of {}\n", per, out.name, n,
                     ck.workgroups[0], ck.workgroups[1], local);
  src += lang.workgroup_size_layout(local, 1);
  // WGSL on a CPU implementation (register_tiles): loads unclamped as in the register-tiled kernels (every index is
  // in range or its value masked; WGSL bounds every storage access)
  src += buffer_declarations(plan, k, p.loaded_inputs(), lang, !(lang.wgsl() && limits.register_tiles));
  src += lang.helpers(p.helpers(), body);
  src += lang.entry_open(local, 1, body) + body;
  ck.source = std::move(src);
  ck.language = lang.language();
  return ck;
}

}  // namespace compute

const char* compute_language_name(ComputeLanguage language) {
  return language == ComputeLanguage::Wgsl ? "wgsl" : language == ComputeLanguage::C ? "c" : "glsl450";
}

ComputeKernel emit_compute_kernel(const Plan& plan, const Kernel& k, const ComputeLimits& limits, ComputeLanguage language,
                                  const std::optional<TileConfig>& tiles) {
  const int nbind = static_cast<int>(k.inputs.size() + k.outputs.size());
  if (nbind > limits.max_storage_buffers)
    throw UnsupportedError(fmt::format(
        "kernel {}: {} storage buffers, the device allows {} per kernel (max_storage_buffers, "
        "GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS / maxPerStageDescriptorStorageBuffers); schedule the plan with "
        "compute_schedule_options(limits)",
        k.name, nbind, limits.max_storage_buffers));
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const Value& v = plan.values[k.outputs[j]];
    if (v.planes > 1 || v.transposed)
      throw UnsupportedError(fmt::format("kernel {}: output {} uses texture-plane storage (row/column planes or "
                                         "transposed); compute kernels need a plan made with compute_schedule_options",
                                         k.name, v.name));
  }
  for (int i : k.inputs)
    if (plan.values[i].planes > 1 || plan.values[i].transposed)
      throw UnsupportedError(fmt::format("kernel {}: input {} uses texture-plane storage; compute kernels need a plan made "
                                         "with compute_schedule_options",
                                         k.name, plan.values[i].name));
  if (tiles && (tiles->threads() > limits.max_workgroup_invocations || tiles->tx < 1 || tiles->ty < 1))
    throw UnsupportedError(fmt::format("kernel {}: tile config {} runs {} invocations per workgroup, more than the "
                                       "device's max_workgroup_invocations {}",
                                       k.name, tiles->str(), tiles->threads(), limits.max_workgroup_invocations));
  // the cpu plan: shifts for power-of-two divisions; C: the kernel's functions prefixed with its name
  const compute::Lang lang(language, limits.register_tiles,
                           language == ComputeLanguage::C ? compute::c_identifier(k.name) + "_" : std::string());
  ComputeKernel ck;
  std::string not_tiled;
  if (k.blocks() > 1) {  // a union-domain kernel: the workgroups partitioned among its blocks
    ck = compute::emit_union_blocks(plan, k, limits, lang);
  } else if (limits.register_tiles) {  // no workgroup memory, no barriers (a CPU implementation of WebGPU)
    if (auto t = compute::emit_register_tiled(plan, k, limits, lang, &not_tiled)) ck = std::move(*t);
    else ck = compute::emit_per_element(plan, k, limits, lang, not_tiled);
  } else if (auto r = compute::emit_tree_reduction(plan, k, limits, lang)) {
    ck = std::move(*r);
  } else if (auto t = compute::emit_tiled_contraction(plan, k, limits, tiles, lang, &not_tiled)) {
    ck = std::move(*t);
  } else if (auto g = compute::emit_subgroup_rows(plan, k, limits, lang)) {
    ck = std::move(*g);
  } else {
    ck = compute::emit_per_element(plan, k, limits, lang, not_tiled);
  }
  ck.language = language;
  if (lang.c()) {  // the exported entry point running a range of workgroups
    ck.entry = "sg_" + compute::c_identifier(k.name);
    ck.source += lang.c_entry(ck.entry, ck.local_size, ck.workgroups);
  }
  for (int v : k.inputs) ck.bindings.push_back(v);
  for (int v : k.outputs) ck.bindings.push_back(v);
  for (int d = 0; d < 3; ++d)
    if (ck.workgroups[d] > limits.max_workgroup_count)
      throw UnsupportedError(fmt::format("kernel {}: {} workgroups in dimension {}, more than the device's max_workgroup_count {}",
                                         k.name, ck.workgroups[d], d, limits.max_workgroup_count));
  const int64_t inv = int64_t{ck.local_size[0]} * ck.local_size[1] * ck.local_size[2];
  if (inv > limits.max_workgroup_invocations)
    throw UnsupportedError(fmt::format("kernel {}: {} invocations per workgroup, more than the device's "
                                       "max_workgroup_invocations {}",
                                       k.name, inv, limits.max_workgroup_invocations));
  for (int v : ck.bindings) {
    const int64_t bytes = plan.values[v].node->numel() * 4;
    if (bytes > limits.max_buffer_bytes)
      throw UnsupportedError(fmt::format("kernel {}: value {} needs a {}-byte storage buffer, more than the device's "
                                         "max_buffer_bytes {} (GL_MAX_SHADER_STORAGE_BLOCK_SIZE / maxStorageBufferRange)",
                                         k.name, plan.values[v].name, bytes, limits.max_buffer_bytes));
  }
  return ck;
}

std::vector<TileConfig> tile_candidates(const Plan& plan, const Kernel& k, const ComputeLimits& limits) {
  const compute::Lang glsl(ComputeLanguage::Glsl450);  // the autotuner times GLSL 4.50 (Vulkan) kernels
  if (k.blocks() > 1) return {};  // union-blocks kernels are never tiled
  if (compute::emit_tree_reduction(plan, k, limits, glsl)) return {};  // the strategy order of emit_compute_kernel
  const Shape shape = plan.values[k.output()].stored_shape();
  auto c = compute::find_contraction(k, shape);
  if (!c) return {};
  std::vector<TileConfig> out;
  for (const TileConfig& t : compute::candidate_configs(limits, *c))
    if (compute::emit_tiled_contraction(plan, k, limits, t, glsl)) out.push_back(t);  // grid and shared memory fit
  return out;
}

}  // namespace sg
