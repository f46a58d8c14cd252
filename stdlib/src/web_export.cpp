// Writing a web bundle (docs/BUNDLE.md): schedule every program for each target (webgl2: GLSL ES fragment shaders;
// webgpu: WGSL compute kernels), write the shaders,
// write the initial persistent values and constants as safetensors (recording each tensor's absolute byte range),
// replay the checks on the CPU reference backend for the expected outputs, copy the JavaScript runtime, and write
// bundle.json last (so a bundle.json on disk always refers to files that were written before it).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/kernel_cache.h"
#include "sg/safetensors.h"
#include "sg/web_export.h"
#include "web_wasm.h"

namespace sg::web {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// A persistent value shared by the programs of a bundle (keyed by node name).
struct PersistentEntry {
  NodePtr node;
  TextureLayout layout;
  Extent alloc;
  std::string first_program;
  bool has_layout = false;  ///< registered from a webgl2 plan (layout and alloc are meaningful)
};

/// Absolute byte ranges [begin, end) of every tensor in a safetensors file, from its own header (so the offsets
/// in bundle.json are what is on disk, whatever padding or metadata the writer chose).
std::map<std::string, std::pair<int64_t, int64_t>> tensor_ranges(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), 8))
    throw IOError(fmt::format("{}: cannot read the safetensors header length it was just written with", path));
  std::string header(n, '\0');
  if (!f.read(header.data(), static_cast<std::streamsize>(n)))
    throw IOError(fmt::format("{}: the safetensors header ({} bytes) is truncated", path, n));
  json h = json::parse(header);
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  const int64_t base = 8 + static_cast<int64_t>(n);
  for (auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    out[name] = {base + e["data_offsets"][0].get<int64_t>(), base + e["data_offsets"][1].get<int64_t>()};
  }
  return out;
}

json data_ref(const std::string& file, const std::string& tensor,
              const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  const auto& r = ranges.at(tensor);
  return {{"file", file}, {"tensor", tensor}, {"offset", r.first}, {"bytes", r.second - r.first}};
}

/// Registers the persistent values of `plan` (one entry per node name; the same layout in every program, an
/// allocation covering every program's draws).
void collect_persistent(const Plan& plan, const std::string& program, std::vector<std::string>& order,
                        std::map<std::string, PersistentEntry>& reg, bool textures) {
  for (const Value& v : plan.values) {
    if (v.kind != ValueKind::Persistent) continue;
    const std::string& name = v.node->name;
    if (name.empty())
      throw ValueError(fmt::format("export: program '{}' has an unnamed persistent value ({}); name every "
                                   "parameter and state (sg::param(\"name\", ...))",
                                   program, v.node->describe()));
    auto it = reg.find(name);
    if (it == reg.end()) {
      reg[name] = {v.node, v.layout, v.extent, program, textures};
      order.push_back(name);
      continue;
    }
    PersistentEntry& e = it->second;
    if (e.node != v.node)
      throw ValueError(fmt::format("export: two different persistent values are named '{}' (programs '{}' and "
                                   "'{}'); the runtime shares persistent values by name: rename one",
                                   name, e.first_program, program));
    if (!textures) continue;  // a webgpu plan: buffers of numel floats, no layout to agree on
    if (!(e.layout == v.layout))
      throw ValueError(fmt::format("export: persistent value '{}' has texture layout {} in program '{}' but {} in "
                                   "'{}'; export the programs with one target",
                                   name, e.layout.str(), e.first_program, v.layout.str(), program));
    e.alloc = e.alloc.cover(v.extent);
  }
}

const std::vector<NodePtr>& inputs_of(const Program& p, std::map<const Program*, std::vector<NodePtr>>& memo) {
  auto it = memo.find(&p);
  if (it == memo.end()) it = memo.emplace(&p, p.inputs()).first;
  return it->second;
}

/// Replays spec.checks on the CPU backend; returns (tensors for expected.safetensors, the `checks` JSON without
/// file offsets). Feeds equal to an earlier stored tensor are stored once.
std::pair<std::vector<io::NamedTensor>, json> run_checks(const BundleSpec& spec, Backend& cpu,
                                                         const std::vector<std::string>& persistent_order,
                                                         const std::map<std::string, PersistentEntry>& reg) {
  std::map<std::string, std::unique_ptr<Executable>> exes;
  std::map<std::string, const Program*> programs;
  for (const BundleProgram& p : spec.programs) programs[p.name] = &p.program;
  std::map<const Program*, std::vector<NodePtr>> memo;
  std::vector<io::NamedTensor> tensors;
  auto store = [&](const std::string& name, const Node& n, const std::vector<float>& data, bool dedupe) {
    if (dedupe)
      for (const io::NamedTensor& t : tensors)
        if (t.data == data && t.shape == std::vector<int64_t>(n.shape.begin(), n.shape.end())) return t.name;
    tensors.push_back({name, std::vector<int64_t>(n.shape.begin(), n.shape.end()), data});
    return name;
  };
  json runs = json::array();
  for (size_t r = 0; r < spec.checks.size(); ++r) {
    const CheckRun& run = spec.checks[r];
    auto pit = programs.find(run.program);
    if (pit == programs.end())
      throw ValueError(fmt::format("export: check run {} names program '{}', which the bundle does not have", r,
                                   run.program));
    const Program& prog = *pit->second;
    if (!exes.count(run.program)) exes[run.program] = cpu.compile(prog);
    json feeds = json::object();
    std::vector<Feed> fv;
    for (auto& [name, data] : run.feeds) {
      const auto& ins = inputs_of(prog, memo);
      const std::string& feed_name = name;  // a named copy: clang 14 cannot capture a structured binding
      auto nit = std::find_if(ins.begin(), ins.end(), [&](const NodePtr& n) { return n->name == feed_name; });
      if (nit == ins.end())
        throw ValueError(fmt::format("export: check run {} feeds '{}', which is not an input of program '{}'", r,
                                     name, run.program));
      feeds[name] = store(fmt::format("run{}/{}", r, name), **nit, data, true);
      fv.push_back({name, &data});
    }
    // run.nodes: every node's value as the CPU backend evaluates it (one hook event per node), by node number
    std::vector<std::pair<const Node*, std::vector<float>>> node_values;
    if (run.nodes)
      exes[run.program]->set_kernel_hook([&](const KernelEvent& ev) {
        if (ev.node) node_values.emplace_back(ev.node, ev.read());
      });
    std::vector<std::vector<float>> out = exes[run.program]->run(fv);
    exes[run.program]->set_kernel_hook({});
    json outs = json::object();
    for (size_t i = 0; i < out.size(); ++i) {
      const std::string& oname = prog.output_names[i];
      outs[oname] = store(fmt::format("run{}/{}", r, oname), *prog.outputs[i], out[i], false);
    }
    json entry = {{"program", run.program}, {"feeds", feeds}, {"outputs", outs}};
    if (run.nodes) {
      std::map<const Node*, int> number;
      const std::vector<NodePtr> order = prog.nodes();
      for (size_t i = 0; i < order.size(); ++i) number[order[i].get()] = static_cast<int>(i);
      json nodes = json::object();
      for (const auto& [node, values] : node_values) {
        auto it = number.find(node);
        if (it == number.end()) continue;  // not a node of the program's order (none expected)
        const std::string key = std::to_string(it->second);
        if (!nodes.contains(key)) nodes[key] = store(fmt::format("run{}/n{}", r, key), *node, values, false);
      }
      entry["nodes"] = nodes;
    }
    runs.push_back(entry);
  }
  json after = json::object();
  for (const std::string& name : persistent_order) {
    const PersistentEntry& e = reg.at(name);
    after[name] = store("final/" + name, *e.node, cpu.read(Tensor(e.node)), false);
  }
  return {std::move(tensors), {{"runs", runs}, {"persistent_after", after}}};
}

void write_runtime(const std::string& dir, std::vector<std::string>& files) {
  std::error_code ec;
  fs::remove_all(fs::path(dir) / "runtime", ec);  // ours: an earlier export's copy
  for (const EmbeddedFile& f : runtime_files()) {
    fs::path p = fs::path(dir) / "runtime" / std::string(f.path);
    fs::create_directories(p.parent_path(), ec);
    if (ec) throw IOError(fmt::format("cannot create {}: {}", p.parent_path().string(), ec.message()));
    write_file_atomic(p.string(), f.bytes);
    files.push_back("runtime/" + std::string(f.path));
  }
}

/// What a device must offer to run every program (bundle.json `requires`) and the storage features they use.
std::pair<json, json> requirements(const std::vector<Plan>& plans, const std::map<std::string, PersistentEntry>& reg) {
  int64_t targets = 1, samplers = 0, size = 1;
  bool transposed = false, row_planes = false, col_planes = false, unions = false, allocated = false;
  for (const Plan& plan : plans) {
    for (const Kernel& k : plan.kernels) {
      int64_t t = 0, s = 0;
      for (int o : k.outputs) t += plan.values[o].planes;
      for (int i : k.inputs) s += plan.values[i].planes;
      targets = std::max(targets, t);
      samplers = std::max(samplers, s);
      unions = unions || k.blocks() > 1;
      size = std::max({size, k.extent.width, k.extent.height});
    }
    for (const Value& v : plan.values) {
      size = std::max({size, v.extent.width, v.extent.height});
      transposed = transposed || v.transposed;
      row_planes = row_planes || v.row_planes() > 1;
      col_planes = col_planes || v.col_planes > 1;
      allocated = allocated || v.extent.width != v.layout.width || v.extent.height != v.layout.height;
    }
  }
  for (auto& [name, e] : reg) size = std::max({size, e.alloc.width, e.alloc.height});
  json features = json::array();
  if (transposed) features.push_back("transposed");
  if (row_planes) features.push_back("row_planes");
  if (col_planes) features.push_back("col_planes");
  if (unions) features.push_back("union_domains");
  if (allocated) features.push_back("allocated_extents");
  return {{{"max_draw_buffers", targets},
           {"max_texture_image_units", samplers},
           {"max_texture_size", size},
           {"extensions", {"EXT_color_buffer_float"}}},
          features};
}

/// The programs scheduled for one target (or one webgpu plan) of a bundle.
struct TargetPlans {
  std::vector<Plan> plans;
  std::vector<std::vector<ComputeKernel>> kernels;  ///< webgpu: per plan, its WGSL kernels
  std::vector<std::vector<std::string>> wgsl;       ///< webgpu: per plan, each kernel's WGSL file (bundle-relative)
  std::string name;  ///< webgpu: the plan's name ("gpu" | "cpu")
  std::string key;   ///< webgpu: its key in bundle.json programs.NAME ("webgpu" for the first plan, else "webgpu_NAME")
  WebGPUTarget target;  ///< webgpu: the target it was scheduled for
};

/// WGSL files already written, per program and source text (a kernel of another plan with the same source names
/// the same file).
using WrittenShaders = std::map<std::pair<std::string, std::string>, std::string>;

void check_program_names(const BundleSpec& spec) {
  for (const BundleProgram& p : spec.programs)
    if (p.name.empty() || p.name.find_first_of("/\\. ") != std::string::npos)
      throw ValueError(fmt::format("export: program name '{}' must be non-empty without '/', '\\\\', '.' or ' '",
                                   p.name));
}

/// webgl2: every program scheduled for the fragment target, its GLSL ES shaders and plan.json dumped.
TargetPlans schedule_webgl2(const BundleSpec& spec, const WebGL2Target& target, const std::string& dir,
                            ExportSummary& sum, std::vector<std::string>& order,
                            std::map<std::string, PersistentEntry>& reg) {
  const ScheduleOptions so = target.schedule_options();
  KernelCache cache(fs::path{});  // memory only: an export never depends on a stale disk cache
  DumpOptions dopt;
  dopt.glsl450 = false;
  dopt.spirv = false;
  TargetPlans t;
  for (const BundleProgram& p : spec.programs) {
    t.plans.push_back(schedule(p.program, so));
    dump_plan(t.plans.back(), fmt::format("{}/shaders/{}", dir, p.name), cache, dopt);
    for (const Kernel& k : t.plans.back().kernels) sum.files.push_back(fmt::format("shaders/{}/{}.frag", p.name, k.name));
    sum.files.push_back(fmt::format("shaders/{}/plan.json", p.name));
    sum.kernels.emplace_back(p.name, static_cast<int>(t.plans.back().kernels.size()));
    collect_persistent(t.plans.back(), p.name, order, reg, true);
  }
  return t;
}

/// webgpu: every program scheduled for the WGSL compute target of one plan, each kernel emitted in WGSL and written
/// as shaders/PROGRAM[/PLAN]/KERNEL.wgsl unless a byte-identical file was written for the program before (then the
/// kernel names that file), plan.webgpu.json beside them. `first`: the bundle's first webgpu plan (its files and
/// constants keep format 2's places: shaders/PROGRAM/, webgpu/PROGRAM/NAME).
TargetPlans schedule_webgpu(const BundleSpec& spec, const WebGPUTarget& target, const std::string& plan_name,
                            bool first, const std::string& dir, ExportSummary& sum, std::vector<std::string>& order,
                            std::map<std::string, PersistentEntry>& reg, WrittenShaders& written) {
  TargetPlans t;
  t.name = plan_name;
  t.key = first ? "webgpu" : "webgpu_" + plan_name;
  std::replace(t.key.begin(), t.key.end(), '-', '_');  // webgpu_cpu_subgroups
  t.target = target;
  t.target.cpu_device = webgpu_plan_kind(plan_name).cpu_device;
  t.target.subgroup_broadcast = webgpu_plan_kind(plan_name).subgroup_broadcast;
  const ScheduleOptions so = t.target.schedule_options();
  // the wgsl target of the preset's limits, its emitter told what the one policy derives (sg::target_policy)
  DeviceCaps caps;
  caps.renderer = fmt::format("a WebGPU device (preset {}, {} plan)", target.preset, plan_name);
  caps.cpu_device = t.target.cpu_device;
  caps.compute = t.target.limits();
  const Target wgsl = make_target(TargetName::Wgsl, caps);
  const auto emitter = make_emitter(wgsl, target_policy(wgsl, BackendOptions{}).emit);
  ExportSummary::WebGPUPlanSummary ps{plan_name, {}, 0};
  for (const BundleProgram& p : spec.programs) {
    Plan plan = schedule(p.program, so);
    const std::string rel = first ? fmt::format("shaders/{}", p.name) : fmt::format("shaders/{}/{}", p.name, plan_name);
    const fs::path sdir = fs::path(dir) / rel;
    std::error_code ec;
    fs::create_directories(sdir, ec);
    if (ec) throw IOError(fmt::format("cannot create {}: {}", sdir.string(), ec.message()));
    std::vector<ComputeKernel> ks;
    std::vector<std::string> files;
    for (const Kernel& k : plan.kernels) {
      try {
        ks.push_back(emitter->compute_kernel(plan, k));
      } catch (const UnsupportedError& e) {
        throw UnsupportedError(fmt::format("export (webgpu {} plan, preset {}): program '{}': {}", plan_name,
                                           target.preset, p.name, e.what()));
      }
      auto [it, fresh] = written.try_emplace({p.name, ks.back().source}, rel + "/" + k.name + ".wgsl");
      if (fresh) {
        write_file_atomic((fs::path(dir) / it->second).string(), ks.back().source);
        sum.files.push_back(it->second);
      } else {
        ++ps.shared_shaders;
      }
      files.push_back(it->second);
    }
    write_file_atomic((sdir / "plan.webgpu.json").string(), plan.to_json().dump(1) + "\n");
    sum.files.push_back(rel + "/plan.webgpu.json");
    ps.kernels.emplace_back(p.name, static_cast<int>(plan.kernels.size()));
    if (first) sum.webgpu_kernels.emplace_back(p.name, static_cast<int>(plan.kernels.size()));
    collect_persistent(plan, p.name, order, reg, false);
    t.plans.push_back(std::move(plan));
    t.kernels.push_back(std::move(ks));
    t.wgsl.push_back(std::move(files));
  }
  sum.webgpu_plans.push_back(std::move(ps));
  return t;
}

/// Checks BundleTargets::webgpu_plans and the shared webgpu target (ValueError naming what is wrong).
void check_webgpu_plans(const BundleTargets& targets) {
  if (!targets.webgpu) return;
  if (targets.webgpu_target.cpu_device)
    throw ValueError("export: BundleTargets::webgpu_target.cpu_device is set; choose the plan for CPU implementations "
                     "of WebGPU with webgpu_plans = {\"cpu\"} (or both: {\"gpu\", \"cpu\"})");
  if (targets.webgpu_target.subgroup_broadcast)
    throw ValueError("export: BundleTargets::webgpu_target.subgroup_broadcast is set; choose the plan with subgroup "
                     "operations with webgpu_plans = {\"cpu-subgroups\"}");
  if (targets.webgpu_plans.empty())
    throw ValueError("export: the webgpu target needs at least one webgpu plan (gpu, cpu, cpu-subgroups)");
  for (size_t i = 0; i < targets.webgpu_plans.size(); ++i) {
    const std::string& n = targets.webgpu_plans[i];
    webgpu_plan_kind(n);  // ValueError for an unknown name
    if (std::find(targets.webgpu_plans.begin(), targets.webgpu_plans.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        targets.webgpu_plans.begin() + static_cast<std::ptrdiff_t>(i))
      throw ValueError(fmt::format("export: webgpu plan '{}' is listed twice", n));
  }
}

/// What a WebGPU device must offer (bundle.json `webgpu.requires`): the GPUSupportedLimits every kernel and buffer
/// of every program needs, named as WebGPU names them (requestDevice's requiredLimits).
json webgpu_requires(const TargetPlans& t, const std::map<std::string, PersistentEntry>& reg) {
  int64_t buffers = 1, inv = 1, sx = 1, sy = 1, sz = 1, shared = 0, groups = 1, bytes = 16;
  int subgroups = 0;  // the subgroup size kernels assume (ComputeKernel::subgroup_size), 0 = none uses them
  auto vec4 = [](int64_t numel) { return (std::max<int64_t>(numel, 1) * 4 + 15) / 16 * 16; };
  for (size_t i = 0; i < t.plans.size(); ++i) {
    for (const ComputeKernel& ck : t.kernels[i]) {
      buffers = std::max<int64_t>(buffers, static_cast<int64_t>(ck.bindings.size()));
      inv = std::max<int64_t>(inv, int64_t{ck.local_size[0]} * ck.local_size[1] * ck.local_size[2]);
      sx = std::max<int64_t>(sx, ck.local_size[0]);
      sy = std::max<int64_t>(sy, ck.local_size[1]);
      sz = std::max<int64_t>(sz, ck.local_size[2]);
      shared = std::max(shared, ck.shared_bytes);
      for (uint32_t g : ck.workgroups) groups = std::max<int64_t>(groups, g);
      subgroups = std::max(subgroups, ck.subgroup_size);
    }
    for (const TextureLayout& b : t.plans[i].buffers) bytes = std::max(bytes, vec4(b.numel));
    for (const Value& v : t.plans[i].values) bytes = std::max(bytes, vec4(v.node->numel()));
  }
  for (auto& [name, e] : reg) bytes = std::max(bytes, vec4(e.node->numel()));
  json limits = {{"maxStorageBuffersPerShaderStage", buffers},
                 {"maxComputeInvocationsPerWorkgroup", inv},
                 {"maxComputeWorkgroupSizeX", sx},
                 {"maxComputeWorkgroupSizeY", sy},
                 {"maxComputeWorkgroupSizeZ", sz},
                 {"maxComputeWorkgroupsPerDimension", groups},
                 {"maxStorageBufferBindingSize", bytes},
                 {"maxBufferSize", bytes}};
  if (shared > 0) limits["maxComputeWorkgroupStorageSize"] = shared;
  json r = {{"limits", limits}, {"features", json::array()}};
  if (subgroups > 0) {  // the 'subgroups' feature, with subgroups of exactly this many consecutive invocations
    r["features"].push_back("subgroups");
    r["subgroup_size"] = subgroups;
  }
  return r;
}

/// Every persistent value's initial value, then every program's constants (webgl2 plans first, then each webgpu
/// plan's under webgpu/PROGRAM/NAME for the first plan and webgpu_PLAN/PROGRAM/NAME for another, unless the first
/// plan has that constant with the same values: its plan then refers to the first plan's tensor): weights.safetensors.
std::vector<io::NamedTensor> initial_tensors(const BundleSpec& spec, Backend& cpu,
                                             const std::vector<std::string>& order,
                                             const std::map<std::string, PersistentEntry>& reg,
                                             const TargetPlans& gl, const std::vector<TargetPlans>& gpus,
                                             const wasm::Plans& wp) {
  std::vector<io::NamedTensor> weights;
  for (const std::string& name : order) {
    const PersistentEntry& e = reg.at(name);
    weights.push_back({name, std::vector<int64_t>(e.node->shape.begin(), e.node->shape.end()),
                       cpu.read(Tensor(e.node))});
  }
  std::map<std::string, const std::vector<float>*> first;  // the first webgpu plan's constants by tensor name
  auto constants = [&](const TargetPlans& t, const std::string& prefix, bool dedupe) {
    for (size_t i = 0; i < t.plans.size(); ++i)
      for (const Value& v : t.plans[i].values) {
        if (v.kind != ValueKind::Constant) continue;
        const std::string tail = fmt::format("{}/{}", spec.programs[i].name, v.name);
        auto it = first.find("webgpu/" + tail);
        if (dedupe && it != first.end() && *it->second == *v.node->data) continue;
        weights.push_back({prefix + tail, std::vector<int64_t>(v.node->shape.begin(), v.node->shape.end()), *v.node->data});
        if (prefix == "webgpu/") first[prefix + tail] = &*v.node->data;
      }
  };
  constants(gl, "", false);
  for (size_t g = 0; g < gpus.size(); ++g) constants(gpus[g], gpus[g].key + "/", g > 0);
  for (size_t i = 0; i < wp.plans.size(); ++i)  // the wasm plan's: wasm/PROGRAM/NAME
    for (const Value& v : wp.plans[i].values)
      if (v.kind == ValueKind::Constant)
        weights.push_back({fmt::format("wasm/{}/{}", spec.programs[i].name, v.name),
                           std::vector<int64_t>(v.node->shape.begin(), v.node->shape.end()), *v.node->data});
  return weights;
}

/// bundle.json `persistent`: name, kind, shape, dtype, the storage of each target, the initial data.
json persistent_json(const std::vector<std::string>& order, const std::map<std::string, PersistentEntry>& reg,
                     const BundleTargets& targets,
                     const std::map<std::string, std::pair<int64_t, int64_t>>& wranges) {
  json persistent = json::array();
  for (const std::string& name : order) {
    const PersistentEntry& e = reg.at(name);
    json j = {{"name", name},
              {"kind", e.node->op == Op::Param ? "param" : "state"},
              {"shape", json(std::vector<int64_t>(e.node->shape.begin(), e.node->shape.end()))},
              {"dtype", dtype_name(e.node->dtype)}};
    if (targets.webgl2) {
      if (!e.has_layout)
        throw ValueError(fmt::format("export: persistent value '{}' appears only in the webgpu plans", name));
      j["layout"] = {{"numel", e.layout.numel}, {"texels", e.layout.texels}, {"width", e.layout.width},
                     {"height", e.layout.height}};
      j["allocated"] = {e.alloc.width, e.alloc.height};
    }
    if (targets.webgpu || targets.wasm) j["buffer_bytes"] = (std::max<int64_t>(e.node->numel(), 1) * 4 + 15) / 16 * 16;
    j["data"] = data_ref("weights.safetensors", name, wranges);
    persistent.push_back(std::move(j));
  }
  return persistent;
}

/// bundle.json `programs`: per program its inputs/outputs, the webgl2 plan's fields and each webgpu plan (under
/// `webgpu` for the first, `webgpu_PLAN` for another).
json programs_json(const BundleSpec& spec, const TargetPlans& gl, const std::vector<TargetPlans>& gpus,
                   const wasm::Plans& wp, const std::map<std::string, std::pair<int64_t, int64_t>>& wranges) {
  json programs = json::object();
  for (size_t i = 0; i < spec.programs.size(); ++i) {
    const std::string& name = spec.programs[i].name;
    json d;
    if (!gl.plans.empty()) {
      d = describe_program(gl.plans[i], "shaders/" + name);
      for (json& v : d["values"])
        if (v["kind"] == "constant")
          v["data"] = data_ref("weights.safetensors", fmt::format("{}/{}", name, v["name"].get<std::string>()), wranges);
      d["kernels_per_run"] = gl.plans[i].kernels.size();
    }
    for (const TargetPlans& gpu : gpus) {
      json w = describe_webgpu_program(gpu.plans[i], gpu.kernels[i], "shaders/" + name);
      for (size_t k = 0; k < gpu.wgsl[i].size(); ++k) w["kernels"][k]["wgsl"] = gpu.wgsl[i][k];
      for (json& v : w["values"])
        if (v["kind"] == "constant") {
          const std::string tail = fmt::format("{}/{}", name, v["name"].get<std::string>());
          const std::string own = gpu.key + "/" + tail;
          v["data"] = data_ref("weights.safetensors", wranges.count(own) ? own : "webgpu/" + tail, wranges);
        }
      if (gl.plans.empty() && !d.contains("inputs")) {  // the program's interface without a webgl2 plan
        d["inputs"] = w["inputs"];
        d["outputs"] = w["outputs"];
        for (json& io : d["inputs"]) io.erase("value");
        for (json& io : d["outputs"]) io.erase("value");
      }
      d[gpu.key] = std::move(w);
    }
    if (!wp.plans.empty()) {
      json w = wasm::describe_program(wp.plans[i], wp.kernels[i], wp.entries[i], fmt::format("wasm/{}.c", name));
      for (json& v : w["values"])
        if (v["kind"] == "constant")
          v["data"] = data_ref("weights.safetensors", fmt::format("wasm/{}/{}", name, v["name"].get<std::string>()), wranges);
      if (!d.contains("inputs")) {  // the program's interface without a webgl2 or webgpu plan
        d["inputs"] = w["inputs"];
        d["outputs"] = w["outputs"];
        for (json& io : d["inputs"]) io.erase("value");
        for (json& io : d["outputs"]) io.erase("value");
      }
      d["wasm"] = std::move(w);
    }
    programs[name] = std::move(d);
  }
  return programs;
}

/// expected.safetensors and bundle.json `checks` (with file offsets, tolerances, the backend that computed them).
json write_checks(const BundleSpec& spec, Backend& cpu, const std::vector<std::string>& order,
                  const std::map<std::string, PersistentEntry>& reg, const std::string& dir, ExportSummary& sum) {
  if (spec.checks.empty()) return nullptr;
  auto [tensors, c] = run_checks(spec, cpu, order, reg);
  const std::string epath = dir + "/expected.safetensors";
  io::save_safetensors(epath, tensors, {{"format", "shadergrad-bundle-expected/1"}, {"backend", cpu.device()}});
  sum.files.push_back("expected.safetensors");
  const auto eranges = tensor_ranges(epath);
  auto resolve = [&](json& names) {
    for (auto& [k, v] : names.items()) v = data_ref("expected.safetensors", v.get<std::string>(), eranges);
  };
  for (json& r : c["runs"]) {
    resolve(r["feeds"]);
    resolve(r["outputs"]);
    if (r.contains("nodes")) resolve(r["nodes"]);
  }
  resolve(c["persistent_after"]);
  c["computed_by"] = cpu.name() + ": " + cpu.device();
  // docs/BUNDLE.md "checks": outputs element by element, persistent values (after Adam steps) as whole tensors
  c["tolerance"] = {{"outputs", {{"metric", "elementwise"}, {"rel", 1e-4}, {"floor", 1e-3}}},
                    {"persistent", {{"metric", "norm"}, {"rel", 1e-4}}}};
  for (auto& [name, t] : spec.persistent_tolerance) {
    if (!reg.count(name) || !(t.abs > 0))
      throw ValueError(fmt::format("export: persistent_tolerance for '{}': {}", name,
                                   reg.count(name) ? "abs must be > 0" : "no persistent value has that name"));
    c["tolerance"]["persistent_by_name"][name] = {{"metric", "abs"}, {"abs", t.abs}, {"why", t.why}};
  }
  if (const auto& t = spec.outputs_tolerance) {
    if (!(t->rel > 0) || !(t->floor >= 0) || t->why.empty())
      throw ValueError(fmt::format("export: outputs_tolerance rel {} floor {}: needs rel > 0, floor >= 0 and a why",
                                   t->rel, t->floor));
    c["tolerance"]["outputs"] = {{"metric", "elementwise"}, {"rel", t->rel}, {"floor", t->floor}, {"why", t->why}};
  }
  return c;
}

void hash_node_attrs(const Node& n, std::string& s) {
  const Attrs& a = n.attrs;
  s += fmt::format(" axes[{}] keep{} perm[{}] shape{} starts{} steps{} pads{}/{}={} classes{} s{}x{} p{}x{} d{}x{} k{}x{}",
                   fmt::join(a.axes, ","), a.keepdims, fmt::join(a.perm, ","), shape_str(a.shape),
                   shape_str(a.starts), shape_str(a.steps), shape_str(a.pads_before), shape_str(a.pads_after),
                   a.value, a.num_classes, a.stride[0], a.stride[1], a.padding[0], a.padding[1], a.dilation[0],
                   a.dilation[1], a.kernel[0], a.kernel[1]);
  if (a.groups != 1) s += fmt::format(" g{}", a.groups);  // only grouped convolutions: other hashes stay as they were
}

}  // namespace

std::string structure_hash(const BundleSpec& spec) {
  std::vector<const BundleProgram*> progs;
  for (const BundleProgram& p : spec.programs) progs.push_back(&p);
  std::sort(progs.begin(), progs.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::string s = "shadergrad-structure/1\n";
  for (const BundleProgram* bp : progs) {
    const Program& p = bp->program;
    std::vector<NodePtr> nodes = p.nodes();
    std::map<const Node*, size_t> pos;
    for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i].get()] = i;
    s += "program " + bp->name + "\n";
    for (const NodePtr& n : nodes) {
      s += fmt::format("{} {} {}", n->label(), shape_str(n->shape), dtype_name(n->dtype));
      for (const NodePtr& in : n->inputs) s += fmt::format(" %{}", pos.at(in.get()));
      hash_node_attrs(*n, s);
      s += "\n";
    }
    for (size_t i = 0; i < p.outputs.size(); ++i)
      s += fmt::format("out {} %{}\n", p.output_names[i], pos.at(p.outputs[i].get()));
    for (const Update& u : p.updates) s += fmt::format("update {} %{}\n", u.target->name, pos.at(u.value.get()));
  }
  return hash_hex(fnv1a64(s));
}

namespace {

/// Every file of the bundle, written into `dir` (empty; write_bundle's staging directory).
ExportSummary write_bundle_files(const BundleSpec& spec, const BundleTargets& targets, const std::string& dir) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  if (spec.prepare) spec.prepare(*cpu);

  ExportSummary sum;
  std::vector<std::string> order;
  std::map<std::string, PersistentEntry> reg;
  TargetPlans gl;
  std::vector<TargetPlans> gpus;
  if (targets.webgl2) gl = schedule_webgl2(spec, targets.webgl2_target, dir, sum, order, reg);
  WrittenShaders written;
  for (size_t i = 0; targets.webgpu && i < targets.webgpu_plans.size(); ++i)
    gpus.push_back(schedule_webgpu(spec, targets.webgpu_target, targets.webgpu_plans[i], i == 0, dir, sum, order, reg,
                                   written));
  wasm::Plans wp;
  if (targets.wasm) {
    wp = wasm::schedule_and_compile(spec, dir, sum.files);
    for (size_t i = 0; i < wp.plans.size(); ++i) {
      collect_persistent(wp.plans[i], spec.programs[i].name, order, reg, false);
      sum.wasm_kernels.emplace_back(spec.programs[i].name, static_cast<int>(wp.plans[i].kernels.size()));
    }
    sum.wasm_compile_ms = wp.compile_ms;
    sum.wasm_bytes = static_cast<int64_t>(fs::file_size(fs::path(dir) / wasm::kModulePath));
  }

  const std::string wpath = dir + "/weights.safetensors";
  io::save_safetensors(wpath, initial_tensors(spec, *cpu, order, reg, gl, gpus, wp),
                       {{"format", "shadergrad-bundle-weights/1"}, {"model", spec.model}});
  sum.files.push_back("weights.safetensors");
  sum.weight_bytes = static_cast<int64_t>(fs::file_size(wpath));
  sum.persistent_values = static_cast<int64_t>(order.size());
  const auto wranges = tensor_ranges(wpath);
  json programs = programs_json(spec, gl, gpus, wp, wranges);
  json persistent = persistent_json(order, reg, targets, wranges);
  json checks = write_checks(spec, *cpu, order, reg, dir, sum);

  write_runtime(dir, sum.files);
  json meta = json::object();
  for (auto& [k, v] : spec.metadata) meta[k] = v;
  meta["structure_hash"] = structure_hash(spec);
  json target_list = json::array();
  if (targets.webgpu) target_list.push_back("webgpu");
  if (targets.webgl2) target_list.push_back("webgl2");
  if (targets.wasm) target_list.push_back("wasm");
  json bundle = {{"format", kBundleFormat}, {"generator", "shadergrad export"}, {"model", spec.model},
                 {"metadata", meta},        {"targets", target_list}};
  if (targets.webgl2) {
    auto [requires_, features] = requirements(gl.plans, reg);
    bundle["target"] = targets.webgl2_target.to_json();
    bundle["requires"] = requires_;
    bundle["features"] = features;
  }
  if (targets.webgpu) {
    // the first plan's target and requires where format 2 had them; every plan in `plans`
    json plans = json::array();
    for (const TargetPlans& g : gpus)
      plans.push_back({{"name", g.name}, {"program_key", g.key}, {"target", g.target.to_json()},
                       {"requires", webgpu_requires(g, reg)}, {"preference", webgpu_plan_kind(g.name).preference}});
    bundle["webgpu"] = {{"target", plans[0]["target"]}, {"requires", plans[0]["requires"]}, {"plans", plans},
                        {"cpu_adapter", cpu_adapter_rule()}};
  }
  if (targets.wasm) bundle["wasm"] = wasm::section(wp);
  bundle["persistent"] = persistent;
  bundle["programs"] = programs;
  bundle["checks"] = checks;
  write_file_atomic(dir + "/bundle.json", bundle.dump(1) + "\n");
  sum.files.push_back("bundle.json");
  return sum;
}

/// Replaces the bundle in `dir` by the one complete in `staging` (inside it): an earlier export's shaders/ and wasm/
/// go (they may be of other targets), then each entry of `staging` replaces its namesake; other files in `dir` stay.
void publish_bundle(const fs::path& staging, const fs::path& dir) {
  std::error_code ec;
  for (const char* old : {"shaders", "wasm"}) fs::remove_all(dir / old, ec);
  for (const auto& entry : fs::directory_iterator(staging)) {
    const fs::path to = dir / entry.path().filename();
    fs::remove_all(to, ec);
    fs::rename(entry.path(), to, ec);
    if (ec) throw IOError(fmt::format("cannot move {} to {}: {}", entry.path().string(), to.string(), ec.message()));
  }
  fs::remove(staging, ec);
}

}  // namespace

ExportSummary write_bundle(const BundleSpec& spec, const BundleTargets& targets, const std::string& dir) {
  if (!targets.webgl2 && !targets.webgpu && !targets.wasm)
    throw ValueError("export: no target chosen (a bundle carries webgpu, webgl2, wasm or several: --targets "
                     "webgpu,webgl2,wasm)");
  check_program_names(spec);
  check_webgpu_plans(targets);
  // written into a staging directory inside `dir` and moved into place only when complete: an export that fails
  // (a checkpoint of another model, a compile error, a full disk) leaves an earlier bundle in `dir` as it was
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw IOError(fmt::format("cannot create the bundle directory {}: {}", dir, ec.message()));
  const fs::path staging = fs::path(dir) / ".export-partial";
  fs::remove_all(staging, ec);  // a crashed export's
  fs::create_directories(staging, ec);
  if (ec) throw IOError(fmt::format("cannot create {}: {}", staging.string(), ec.message()));
  ExportSummary sum;
  try {
    sum = write_bundle_files(spec, targets, staging.string());
  } catch (...) {
    fs::remove_all(existed ? staging : fs::path(dir), ec);
    throw;
  }
  publish_bundle(staging, dir);
  return sum;
}

}  // namespace sg::web
