// layout_vectors: writes the storage test vectors that tests/layout_vectors_check.mjs checks the web runtime's
// readback and upload against (issue 35). Run at test time (ctest layout_vectors), so the vectors always come
// from today's C++:
//
//   layout_vectors OUT.json
//
// Every value of a set of small programs, scheduled with options that make every storage form the schedule
// produces (plain, transposed, row planes 2/4/8 of 2-D and 3-D values, column planes, row-aligned layouts, rows
// wrapping at a narrow texture width, 0-d, 1-element, empty), becomes one texture vector:
//   - "value": the value's record exactly as bundle.json writes it (sg::web::describe_program: shape, layout,
//     allocated, storage, kind, ...);
//   - "planes": per texture (plane), its whole allocated RGBA32F image (allocated width x height x 4 floats, GL
//     row order) as a draw would leave it: the value's elements at TextureLayout::locate of their storage-order
//     index, every other float a sentinel (a draw writes whatever its shader computes past numel);
//   - "expected": the row-major tensor; "padded_floats" and "rows_for_numel" from TextureLayout.
// and every value of the same programs' webgpu plans (sg::web::describe_webgpu_program: bytes, transposed) one
// buffer vector: "buffer", the bytes / 4 floats of the storage buffer (storage order, then the sentinel).
// Floats are written as their IEEE-754 bit patterns (uint32), so NaN, -0 and the infinities survive JSON.
//
// Storage order (sg/schedule.h Value): element e of one texture's storage order is element e of the row-major
// flattening of Value::stored_shape(); a transposed value's texture holds the transpose, and plane p * Pc + q of a
// value with Pr row planes and Pc column planes holds, at its row r and column c, element
// (r * Pr + p, ((c / 4) * Pc + q) * 4 + c % 4) of the tensor's [rows, C] view. The GLES backend's readback
// (GlesExecutable::read_value, runtime/src/gles_backend.cpp) is private to the backend, so the packing here is
// written from that contract with the public TextureLayout / Value API; the generator checks that each texture's
// layout holds exactly stored_shape()'s elements, and, where a GL device exists (llvmpipe in CI), draws the
// producing kernels of the planed and transposed matmuls of inputs with gles::Device and the fragment emitter's
// shaders and requires every texture the GPU wrote to hold what this placement says (GpuCheck): it fails otherwise.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sg/compute_kernel.h"
#include "sg/emitter.h"
#include "sg/gles_device.h"
#include "sg/shader_compiler.h"
#include "sg/target.h"
#include "sg/schedule.h"
#include "sg/sg.h"
#include "sg/web_export.h"

using nlohmann::json;
using namespace sg;

namespace {

constexpr uint32_t kSentinel = 0xf1e2d3c4u;  // -2.2e30: what a texel past numel holds in the vectors' images

/// The known tensor: element i is i * 0.5 - 3, with NaN, -0, +inf and -inf at a few positions.
float tensor_value(int64_t i) {
  if (i % 17 == 5) return std::numeric_limits<float>::quiet_NaN();
  if (i % 19 == 7) return -0.0f;
  if (i % 23 == 11) return std::numeric_limits<float>::infinity();
  if (i % 29 == 13) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(i) * 0.5f - 3.0f;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// Row-major index into the tensor of the element at storage-order index `e` of texture `plane` of `v`.
int64_t tensor_index(const Value& v, int plane, int64_t e) {
  const Shape& shape = v.node->shape;
  if (v.planes > 1) {
    const int64_t Pr = v.row_planes(), Pc = v.col_planes, C = shape.back(), pc = C / Pc;
    const int64_t p = plane / Pc, q = plane % Pc, r = e / pc, c = e % pc;
    return (r * Pr + p) * C + ((c / 4) * Pc + q) * 4 + c % 4;
  }
  if (v.transposed) {  // the texture holds the [cols, rows] transpose
    const int64_t rows = shape[0];
    return (e % rows) * shape[1] + e / rows;
  }
  return e;
}

struct Counts {
  std::set<std::string> forms;
  void add(const std::string& f) { forms.insert(f); }
};

/// The storage forms a value exercises, for the coverage check at the end.
void classify(const Value& v, Counts& seen) {
  const Shape& s = v.node->shape;
  if (v.transposed) seen.add("transposed");
  if (v.planes > 1) seen.add(fmt::format("row_planes_{}", v.row_planes()));
  if (v.col_planes > 1) seen.add("col_planes");
  if (v.planes > 1 && v.layout.height > 1 && (v.layout.height % v.row_planes()) != 0)
    seen.add("plane_height_not_multiple_of_planes");
  if (v.planes > 1 && v.layout.height > 1) seen.add("planes_several_texture_rows");
  if (v.planes == 1 && !v.transposed) seen.add("plain");
  if (s.empty()) seen.add("0d");
  if (s.size() == 1) seen.add("1d");
  if (v.layout.numel == 1) seen.add("one_element");
  if (v.layout.numel == 0) seen.add("empty");
  if (v.layout.height > 1 && v.layout.numel % 4 != 0) seen.add("partial_last_texel");
  if (v.layout.texels % v.layout.width != 0) seen.add("padded_last_row");
  if ((v.layout.width & (v.layout.width - 1)) != 0) seen.add("width_not_power_of_two");
  if (s.size() >= 2 && s.back() % 4 == 0 && v.layout.width % (s.back() / 4) == 0 && v.layout.width > s.back() / 4)
    seen.add("row_aligned_several_rows_per_texture_row");
  if (s.size() >= 2 && s[0] != s[1]) seen.add("non_square");
  if (v.planes > 1 && s.size() > 2) seen.add("planes_3d");
  if (v.extent.width > v.layout.width || v.extent.height > v.layout.height) seen.add("allocated_beyond_layout");
  if (v.kind == ValueKind::Persistent) seen.add("persistent");
  if (v.kind == ValueKind::Input) seen.add("input");
  if (v.update_of >= 0) seen.add("update");
}

json texture_vector(const std::string& name, const Value& v, const json& record, Counts& seen) {
  const int64_t n = v.node->numel();
  const int64_t per = v.layout.numel;
  if (product(v.stored_shape()) != per)
    throw std::runtime_error(fmt::format("{}: value {} stores {} elements per texture but its layout has {}", name,
                                         v.name, product(v.stored_shape()), per));
  if (per * v.planes != n)
    throw std::runtime_error(fmt::format("{}: value {}: {} planes of {} elements for a tensor of {}", name, v.name,
                                         v.planes, per, n));
  const int64_t W = std::max(v.extent.width, v.layout.width), H = std::max(v.extent.height, v.layout.height);
  json planes = json::array();
  std::vector<int> hit(static_cast<size_t>(n), 0);
  for (int p = 0; p < v.planes; ++p) {
    std::vector<uint32_t> img(static_cast<size_t>(W * H * 4), kSentinel);
    for (int64_t e = 0; e < per; ++e) {
      const int64_t t = tensor_index(v, p, e);
      if (t < 0 || t >= n) throw std::runtime_error(fmt::format("{}: {} plane {} element {} -> {}", name, v.name, p, e, t));
      ++hit[static_cast<size_t>(t)];
      const TextureLayout::Location at = v.layout.locate(e);
      img[static_cast<size_t>((at.y * W + at.x) * 4 + at.component)] = bits(tensor_value(t));
    }
    planes.push_back(img);
  }
  for (int64_t t = 0; t < n; ++t)
    if (hit[static_cast<size_t>(t)] != 1)
      throw std::runtime_error(fmt::format("{}: {} element {} stored {} times", name, v.name, t, hit[static_cast<size_t>(t)]));
  std::vector<uint32_t> expected(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) expected[static_cast<size_t>(t)] = bits(tensor_value(t));
  classify(v, seen);
  return {{"case", name},
          {"value", record},
          {"texture", {W, H}},
          {"padded_floats", v.layout.padded_floats()},
          {"rows_for_numel", v.layout.rows_for(per)},
          {"planes", planes},
          {"expected", expected}};
}

json buffer_vector(const std::string& name, const Value& v, const json& record) {
  const int64_t n = v.node->numel();
  const int64_t bytes = record.at("bytes").get<int64_t>();
  if (bytes % 16 != 0 || bytes < 4 * n)
    throw std::runtime_error(fmt::format("{}: webgpu value {}: {} bytes for {} floats", name, v.name, bytes, n));
  std::vector<uint32_t> buf(static_cast<size_t>(bytes / 4), kSentinel);
  for (int64_t e = 0; e < n; ++e) buf[static_cast<size_t>(e)] = bits(tensor_value(tensor_index(v, 0, e)));
  std::vector<uint32_t> expected(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) expected[static_cast<size_t>(t)] = bits(tensor_value(t));
  return {{"case", name}, {"value", record}, {"buffer", buf}, {"expected", expected}};
}

/// The native side of the packing, where a GL device exists: the producing kernels of planed and transposed
/// matmuls of two inputs drawn by gles::Device with the fragment emitter's shaders (as the GLES backend draws
/// them), each plane downloaded in storage order (Device::download: the layout's texels) and compared bit for bit
/// with tensor_index's placement of the matmul computed here (small integers: exact in float).
struct GpuCheck {
  std::unique_ptr<gles::Device> dev;
  std::unique_ptr<const Emitter> emitter;
  std::string skipped;  ///< why there is no device ("" when there is one)
  int values = 0;       ///< planed or transposed values checked
  int planes = 0;       ///< their textures checked

  GpuCheck() {
    try {
      dev = gles::Device::create();
      DeviceCaps caps;
      caps.renderer = "layout_vectors";
      caps.max_draw_buffers = 8;
      emitter = make_emitter(make_target(TargetName::GlslEsFragment, caps));
    } catch (const std::exception& e) {
      dev.reset();
      skipped = e.what();
    }
  }

  static float input_value(int id, int64_t i) { return static_cast<float>((i * 7 + id * 3) % 11 - 5); }

  void check(const std::string& name, const Plan& plan) {
    if (!dev) return;
    for (const Kernel& k : plan.kernels) {
      bool wanted = false, fed = k.blocks() == 1;
      for (int o : k.outputs) wanted = wanted || plan.values[o].planes > 1 || plan.values[o].transposed;
      for (int i : k.inputs) fed = fed && plan.values[i].kind == ValueKind::Input;
      if (!wanted || !fed) continue;
      std::vector<gles::Texture> ins;
      std::vector<std::pair<std::string, const gles::Texture*>> bind;
      ins.reserve(k.inputs.size());
      for (int i : k.inputs) {
        const Value& v = plan.values[i];
        std::vector<float> data(static_cast<size_t>(v.node->numel()));
        for (size_t e = 0; e < data.size(); ++e) data[e] = input_value(v.id, static_cast<int64_t>(e));
        ins.push_back(dev->create_texture(v.layout, v.name, v.extent.width, v.extent.height));
        dev->upload(ins.back(), data.data(), v.node->numel());
      }
      for (size_t j = 0; j < k.inputs.size(); ++j) bind.emplace_back("in_" + plan.values[k.inputs[j]].name, &ins[j]);
      std::vector<gles::Texture> outs;
      for (int o : k.outputs)
        for (int p = 0; p < plan.values[o].planes; ++p)
          outs.push_back(dev->create_texture(plan.values[o].layout, plan.values[o].name, plan.values[o].extent.width,
                                             plan.values[o].extent.height));
      const CompiledShader c = compile_shader(k.name, emitter->source(plan, k), ShaderStage::Fragment);
      const gles::Program prog = dev->create_program(c.gles, k.name, c.declared);
      std::vector<gles::Texture*> targets;
      for (auto& t : outs) targets.push_back(&t);
      if (targets.size() == 1) dev->draw(prog, bind, *targets[0], k.name);
      else dev->draw(prog, bind, targets, k.name);
      size_t slot = 0;
      for (int o : k.outputs) {
        const Value& v = plan.values[o];
        const Node& n = *v.node;
        const bool matmul_of_inputs = n.op == Op::MatMul && n.inputs[0]->is_leaf() && n.inputs[1]->is_leaf() &&
                                      n.inputs[0]->shape.size() == n.shape.size() &&
                                      n.inputs[1]->shape.size() == n.shape.size();
        if (!(v.planes > 1 || v.transposed) || !matmul_of_inputs) {
          slot += static_cast<size_t>(v.planes);
          continue;
        }
        // the matmul, row-major, batched over the leading axes
        const Value& va = plan.value_of(n.inputs[0].get());
        const Value& vb = plan.value_of(n.inputs[1].get());
        const size_t r = n.shape.size();
        const int64_t M = n.shape[r - 2], N = n.shape[r - 1], K = n.inputs[0]->shape[r - 1];
        const int64_t B = n.numel() / (M * N);
        std::vector<float> t(static_cast<size_t>(n.numel()));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double acc = 0;
              for (int64_t q = 0; q < K; ++q)
                acc += static_cast<double>(input_value(va.id, (b * M + i) * K + q)) *
                       input_value(vb.id, (b * K + q) * N + j);
              t[static_cast<size_t>((b * M + i) * N + j)] = static_cast<float>(acc);
            }
        for (int p = 0; p < v.planes; ++p, ++slot) {
          std::vector<float> got(static_cast<size_t>(v.layout.numel));
          dev->download(outs[slot], got.data(), v.layout.numel);
          for (int64_t e = 0; e < v.layout.numel; ++e)
            if (bits(got[static_cast<size_t>(e)]) != bits(t[static_cast<size_t>(tensor_index(v, p, e))]))
              throw std::runtime_error(fmt::format(
                  "{}: the GPU's texture {} of {} (planes {}, col planes {}, transposed {}) holds {} at storage "
                  "element {}, the vectors' placement says {} (tensor element {})",
                  name, p, v.name, v.planes, v.col_planes, v.transposed, got[static_cast<size_t>(e)], e,
                  t[static_cast<size_t>(tensor_index(v, p, e))], tensor_index(v, p, e)));
          ++planes;
        }
        ++values;
      }
    }
  }
};

struct Case {
  std::string name;
  std::function<Program()> program;
  ScheduleOptions options;
  std::vector<std::string> forms;  ///< storage forms this case must produce (the schedule's heuristics may change)
};

/// A matmul t = a.b of [rows, k] x [k, cols], read as the A operand of another matmul and summed over rows:
/// the row-planes rule tiles it (when asked), the transposed-storage rule otherwise keeps it row-major.
Program planed_matmul(int64_t rows, int64_t k, int64_t cols) {
  Tensor a = input("a", {rows, k});
  Tensor b = input("b", {k, cols});
  Tensor c = input("c", {cols, 8});
  Tensor t = matmul(a, b);
  Program p;
  p.add_output("y", matmul(t, c));
  p.add_output("s", sum(t, {0}));
  return p;
}

/// A temporary that every reader reduces over axis 0, [rows, cols] (stored transposed: both multiples of 4, rows >= 8).
Program transposed_temp(int64_t rows, int64_t k, int64_t cols) {
  Tensor a = input("a", {rows, k}), b = input("b", {k, cols}), c = input("c", {4, rows});
  Tensor t = matmul(a, b);
  Program p;
  p.add_output("ct", matmul(c, t));
  p.add_output("rows", sum(t, {0}));
  return p;
}

/// Small shapes: 0-d, 1-element, 1-d, empty, 3-d, a persistent value with an update.
Program small_shapes() {
  Tensor x = input("x", {10});
  Tensor one = input("one", {1});
  Tensor m = input("m", {3, 5});
  Tensor cube = input("cube", {2, 3, 8});
  Tensor w = param("w", {5, 7}, std::vector<float>(35, 0.25f));
  Program p;
  p.add_output("scalar", sum(x));           // 0-d
  p.add_output("x2", x * 2.0f + one);       // 1-d, broadcast 1-element
  p.add_output("mw", matmul(m, w));         // [3, 7]
  p.add_output("cube2", relu(cube) * 3.0f);  // 3-d, last axis a multiple of 4
  Tensor s = state("count", {1}, {0.0f});
  p.add_output("one2", with_state_updates(one * 1.0f, {{s, s + 1.0f}}));
  return p;
}

Program empty_tensor() {
  Tensor e = input("e", {0, 4});
  Tensor x = input("x", {6});
  Program p;
  p.add_output("e2", e * 2.0f);
  p.add_output("x2", x + 1.0f);
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  ScheduleOptions planes;  // row planes on small tensors (the WebGL2 target's threshold is 1024 texels a plane)
  planes.min_plane_texels = 1;
  planes.max_outputs = 8;
  for (int P : {2, 4, 8}) {
    ScheduleOptions o = planes;
    o.row_planes = P;
    // 40 rows: 20, 10, 5 rows per plane; cols 12: 3 texels a row (a plane's layout is not a whole number of rows)
    out.push_back({fmt::format("row_planes_{}", P), [] { return planed_matmul(40, 8, 12); }, o,
                   {fmt::format("row_planes_{}", P)}});
    // 200 rows: a plane of [200 / P, 12] in texture rows of whole tensor rows (several texture rows, the last
    // part-filled)
    ScheduleOptions ra = o;
    ra.row_aligned_layout = true;
    out.push_back({fmt::format("row_planes_{}_row_aligned", P), [] { return planed_matmul(200, 8, 12); }, ra,
                   {fmt::format("row_planes_{}", P), "padded_last_row"}});
    // a plane's rows wrap at 7 texels
    ScheduleOptions narrow = o;
    narrow.max_texture_width = 7;
    narrow.max_texture_height = 4096;
    out.push_back({fmt::format("row_planes_{}_narrow", P), [] { return planed_matmul(40, 8, 12); }, narrow,
                   {fmt::format("row_planes_{}", P)}});
  }
  {
    ScheduleOptions o = planes;
    o.row_planes = 4;
    o.col_planes = 2;
    out.push_back({"col_planes_4x2", [] { return planed_matmul(12, 8, 16); }, o, {"row_planes_4", "col_planes"}});
    o.row_aligned_layout = true;
    out.push_back({"col_planes_4x2_row_aligned", [] { return planed_matmul(64, 8, 48); }, o,
                   {"row_planes_4", "col_planes"}});
    o.row_planes = 2;
    o.max_texture_width = 5;  // rows of a plane wrap in a narrow texture
    o.max_texture_height = 4096;
    out.push_back({"col_planes_2x2_narrow", [] { return planed_matmul(6, 4, 16); }, o, {"row_planes_2", "col_planes"}});
  }
  {
    // a batched matmul [3, 8, 12]: planes of a 3-D value (rows of its [24, 12] view; plane p holds the rows
    // 8 b + m with m % 4 == p)
    ScheduleOptions o = planes;
    o.row_planes = 4;
    out.push_back({"row_planes_batched", [] {
                     Tensor a = input("a", {3, 8, 8});
                     Tensor b = input("b", {3, 8, 12});
                     Tensor c = input("c", {3, 12, 8});
                     Tensor t = matmul(a, b);
                     Program p;
                     p.add_output("y", matmul(t, c));
                     p.add_output("s", sum(t, {1}));
                     return p;
                   },
                   o, {"planes_3d"}});
  }
  out.push_back({"transposed", [] { return transposed_temp(8, 8, 12); }, {}, {"transposed", "non_square"}});
  {
    ScheduleOptions o;
    o.row_aligned_layout = true;
    out.push_back({"transposed_row_aligned", [] { return transposed_temp(20, 8, 12); }, o, {"transposed"}});
    o.max_texture_width = 3;
    o.max_texture_height = 4096;
    out.push_back({"transposed_narrow", [] { return transposed_temp(12, 8, 8); }, o, {"transposed"}});
  }
  out.push_back({"small_shapes", small_shapes, {}, {"0d", "1d", "one_element", "persistent", "update", "input"}});
  {
    ScheduleOptions o;
    o.row_aligned_layout = true;
    out.push_back({"small_shapes_row_aligned", small_shapes, o, {"row_aligned_several_rows_per_texture_row"}});
    o.max_texture_width = 2;  // every layout wraps at 2 texels
    o.max_texture_height = 4096;
    out.push_back({"small_shapes_width_2", small_shapes, o, {"padded_last_row", "partial_last_texel"}});
  }
  {
    // row-aligned layouts whose width is not a power of two and whose last texture row is part-filled:
    // [22, 20] -> 5 texels a row, 13 rows a texture row (65 texels wide), 2 texture rows
    ScheduleOptions o;
    o.row_aligned_layout = true;
    out.push_back({"row_aligned_padded", [] {
                     Tensor x = input("x", {22, 20});
                     Tensor y = input("y", {37, 12});
                     Program p;
                     p.add_output("x2", x * 2.0f);
                     p.add_output("y2", y * 2.0f);
                     return p;
                   },
                   o, {"width_not_power_of_two", "padded_last_row", "row_aligned_several_rows_per_texture_row"}});
  }
  {
    // wide tensors whose rows wrap at the texture width (for_numel: max width 64)
    ScheduleOptions o;
    o.max_texture_width = 64;
    o.max_texture_height = 4096;
    out.push_back({"wrapping_rows", [] {
                     Tensor x = input("x", {3, 1001});
                     Tensor z = input("z", {2, 1000});
                     Program p;
                     p.add_output("x2", x * 2.0f);
                     p.add_output("z2", z * 2.0f);
                     return p;
                   },
                   o, {"partial_last_texel", "padded_last_row"}});
  }
  {
    // a union-domain kernel: textures allocated beyond their own layouts
    out.push_back({"union_extent", [] {
                     Tensor x = input("x", {64, 64});
                     Tensor b = input("b", {10});
                     Program p;
                     p.add_output("x2", x * 2.0f);
                     p.add_output("b2", b * 3.0f);
                     return p;
                   },
                   {}, {}});
  }
  out.push_back({"empty", empty_tensor, {}, {"empty"}});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: layout_vectors OUT.json\n";
    return 2;
  }
  try {
    json textures = json::array(), buffers = json::array();
    Counts all;
    GpuCheck gpu_check;
    for (const Case& c : cases()) {
      Program prog;
      try {
        prog = c.program();
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("case {}: building the program: {}", c.name, e.what()));
      }
      const Plan plan = schedule(prog, c.options);
      const json desc = web::describe_program(plan, "shaders/" + c.name);
      gpu_check.check(c.name, plan);
      Counts seen;
      for (const Value& v : plan.values) textures.push_back(texture_vector(c.name, v, desc.at("values").at(v.id), seen));
      for (const std::string& f : c.forms)
        if (!seen.forms.count(f))
          throw std::runtime_error(fmt::format("case {}: the schedule made no value of storage form '{}' (it made: {})",
                                               c.name, f, fmt::join(seen.forms, ", ")));
      all.forms.insert(seen.forms.begin(), seen.forms.end());
      // the webgpu plan of the same program: buffers (row-major, vec4-rounded sizes)
      web::WebGPUTarget gpu;
      const Plan gplan = schedule(prog, gpu.schedule_options());
      std::vector<ComputeKernel> ks;
      for (const Kernel& k : gplan.kernels) ks.push_back(emit_compute_kernel(gplan, k, gpu.limits(), ComputeLanguage::Wgsl));
      const json gdesc = web::describe_webgpu_program(gplan, ks, "shaders/" + c.name);
      for (const Value& v : gplan.values) {
        if (v.planes > 1 || v.transposed)
          throw std::runtime_error(fmt::format("case {}: webgpu value {} has texture storage", c.name, v.name));
        buffers.push_back(buffer_vector(c.name + " (webgpu)", v, gdesc.at("values").at(v.id)));
      }
      // Compute plans never store a value transposed today (compute_schedule_options turns it off and
      // emit_compute_kernel refuses such a plan), yet the webgpu and wasm executors' readValue undo a record's
      // "transposed": the fragment plan's transposed values as buffers, records written like web_webgpu.cpp's.
      for (const Value& v : plan.values) {
        if (!v.transposed) continue;
        json rec = desc.at("values").at(v.id);
        for (const char* f : {"layout", "allocated", "storage", "plane_buffers"}) rec.erase(f);
        rec["bytes"] = (std::max<int64_t>(v.node->numel(), 1) * 4 + 15) / 16 * 16;
        rec["transposed"] = true;
        buffers.push_back(buffer_vector(c.name + " (transposed buffer, not made by today's compute plans)", v, rec));
        all.add("buffer_transposed");
      }
    }
    for (const char* f : {"plain", "transposed", "planes_several_texture_rows", "row_planes_2", "row_planes_4",
                          "row_planes_8", "planes_3d", "col_planes",
                          "plane_height_not_multiple_of_planes", "0d", "1d", "one_element", "empty",
                          "width_not_power_of_two", "padded_last_row", "partial_last_texel", "non_square",
                          "allocated_beyond_layout", "buffer_transposed"})
      if (!all.forms.count(f))
        throw std::runtime_error(fmt::format("no case made storage form '{}' (made: {})", f, fmt::join(all.forms, ", ")));
    const std::string gpu = gpu_check.dev ? fmt::format("{} planed or transposed values ({} textures) drawn on {} "
                                                        "hold what the vectors place there", gpu_check.values,
                                                        gpu_check.planes, gpu_check.dev->caps().renderer)
                                          : "skipped (no GL device: " + gpu_check.skipped + ")";
    json out = {{"generator", "tests/layout_vectors.cpp"},
                {"gles_cross_check", gpu},
                {"sentinel", kSentinel},
                {"forms", all.forms},
                {"textures", textures},
                {"buffers", buffers}};
    std::ofstream f(argv[1]);
    f << out.dump() << "\n";
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", argv[1]));
    std::cout << fmt::format("layout_vectors: {} texture vectors, {} buffer vectors, forms: {}; GLES: {}\n",
                             textures.size(), buffers.size(), fmt::join(all.forms, ", "), gpu);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "layout_vectors: " << e.what() << "\n";
    return 1;
  }
}
