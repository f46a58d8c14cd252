// The CPU backend: runs Programs with the reference executor; persistent values kept as f32.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/cpu_reference.h"
#include "sg/feeds.h"
#include "sg/target.h"
#include "sg/tensor.h"
#include "sg/vulkan_device.h"

namespace sg {

namespace {

/// Current values of persistent leaves. Keyed by node address; `keep` holds the nodes alive so an address is
/// never reused by a later node while its state exists.
struct StateMap {
  std::unordered_map<const Node*, std::vector<double>> values;
  std::vector<NodePtr> keep;
  std::vector<double>& at(const NodePtr& n) {
    auto it = values.find(n.get());
    if (it == values.end()) {
      keep.push_back(n);
      it = values.emplace(n.get(), std::vector<double>(n->data->begin(), n->data->end())).first;
    }
    return it->second;
  }
};

class CpuExecutable final : public Executable {
 public:
  /// `state` is shared with the backend and its other executables (a train and an infer program see one set of
  /// parameters); the executable keeps it alive, so it runs after the backend is gone.
  CpuExecutable(Program p, std::shared_ptr<StateMap> state)
      : prog_(std::move(p)), feeds_(prog_), state_(std::move(state)), nodes_(prog_.nodes().size()) {}
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) override {
    cpu::LeafValues leaves;
    std::vector<const std::vector<float>*> data = feeds_.check(feeds);
    for (size_t i = 0; i < data.size(); ++i) leaves[feeds_.inputs()[i].get()].assign(data[i]->begin(), data[i]->end());
    for (auto& n : prog_.persistent()) leaves[n.get()] = state_->at(n);
    std::vector<NodePtr> roots = prog_.roots();
    std::function<void(const Node&, const std::vector<double>&)> on_node;
    int index = 0;
    if (hook_)
      on_node = [&](const Node& n, const std::vector<double>& v) {
        KernelEvent ev;
        ev.index = index++;
        ev.name = n.label();
        ev.node = &n;
        ev.read = [&v] { return std::vector<float>(v.begin(), v.end()); };
        hook_(ev);
      };
    auto vals = cpu::evaluate(roots, leaves, {}, on_node);
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < prog_.outputs.size(); ++i) out.emplace_back(vals[i].begin(), vals[i].end());
    for (size_t u = 0; u < prog_.updates.size(); ++u)
      state_->at(prog_.updates[u].target) = vals[prog_.outputs.size() + u];
    return out;
  }
  int kernels_per_step() const override { return static_cast<int>(nodes_); }

 private:
  Program prog_;
  FeedChecker feeds_;
  std::shared_ptr<StateMap> state_;
  size_t nodes_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device() const override { return "CPU reference (f32 storage, f64 accumulation)"; }
  std::unique_ptr<Executable> compile(const Program& p) override {
    return std::make_unique<CpuExecutable>(p, state_);
  }
  std::vector<float> read(const Tensor& leaf) override {
    if (!leaf.node()->data) throw ValueError("read: " + leaf.node()->describe() + " is not a parameter or state");
    const std::vector<double>& v = state_->at(leaf.node());
    return std::vector<float>(v.begin(), v.end());
  }
  void write(const Tensor& leaf, const std::vector<float>& data) override {
    if (static_cast<int64_t>(data.size()) != leaf.numel())
      throw ValueError(fmt::format("write: {} expects {} values, got {}", leaf.node()->describe(), leaf.numel(),
                                   data.size()));
    if (!leaf.node()->data) throw ValueError("write: " + leaf.node()->describe() + " is not a parameter or state");
    state_->at(leaf.node()).assign(data.begin(), data.end());
  }

 private:
  std::shared_ptr<StateMap> state_ = std::make_shared<StateMap>();
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

BackendChoice make_backend(const BackendOptions& opt) {
  if (opt.kind == "cpu") return {make_cpu_backend(), ""};
  if (opt.kind == "gles") return {make_gles_backend(opt), ""};
  if (opt.kind == "gles-compute") return {make_gles_compute_backend(opt), ""};
  if (opt.kind == "vulkan") return {make_vulkan_backend(opt), ""};
  if (opt.kind == "cpu-simd") return {make_cpu_simd_backend(opt), ""};
  if (opt.kind != "auto")
    throw ValueError(
        fmt::format("unknown backend '{}' (choose auto, gles, gles-compute, vulkan, cpu-simd or cpu)", opt.kind));
  return make_auto_backend(opt);
}

namespace {

/// The cpu-simd backend when its C compiler builds and loads a one-kernel probe program (cached after the first
/// time: a library load), else nullptr with the reason in `why`.
std::unique_ptr<Backend> working_cpu_simd(const BackendOptions& opt, std::string& why) {
  try {
    std::unique_ptr<Backend> simd = make_cpu_simd_backend(opt);
    Program probe;
    probe.add_output("y", exp(input("x", {4})));
    simd->compile(probe);
    return simd;
  } catch (const BackendError& e) {
    why = e.what();
    return nullptr;
  }
}

}  // namespace

/// kind "auto": the backends in their measured order of speed for the device class (docs/decisions.md). On a
/// GPU: vulkan, gles-compute, gles. On a machine whose GL and Vulkan devices are CPU implementations (Mesa's
/// lavapipe and llvmpipe), or that has neither: cpu-simd (C kernels compiled for the host CPU; docs/perf-log/22.md:
/// the MLP b=128 step 2.3 ms against llvmpipe GLES 27.5 ms and lavapipe Vulkan 45.5 ms), then gles (of the GPU-API
/// paths the fragment path measured fastest on CPUs), then the CPU reference. Each skipped backend's reason goes
/// into `note` (seed 000's fallback chain). Only a missing or unusable device falls back; invalid options
/// (ValueError) are thrown.
BackendChoice make_auto_backend(const BackendOptions& opt) {
  std::string note;
  auto skip = [&](const std::string& kind, const std::string& why) {
    note += fmt::format("{}{}: {}", note.empty() ? "" : "\n", kind, why);
  };
  constexpr const char* kCpuDevice = "a CPU implementation; on CPUs cpu-simd's C kernels measured faster, skipped";
  try {
    std::unique_ptr<Backend> vk = make_vulkan_backend(opt);
    if (!vulkan_device(*vk).caps().limits.cpu_device) return {std::move(vk), note};
    skip("vulkan", fmt::format("'{}' is {}", vk->device(), kCpuDevice));
  } catch (const BackendError& e) {
    skip("vulkan", e.what());
  }
  std::unique_ptr<Backend> gles;
  try {
    gles = make_gles_backend(opt);
  } catch (const BackendError& e) {
    skip("gles", e.what());
  }
  if (gles && !is_cpu_renderer(gles->device())) {
    try {
      return {make_gles_compute_backend(opt), note};
    } catch (const BackendError& e) {
      skip("gles-compute", e.what());
    }
    return {std::move(gles), note};
  }
  if (gles) {
    skip("gles-compute", fmt::format("'{}' is {}", gles->device(), kCpuDevice));
    skip("gles", fmt::format("'{}' is {}", gles->device(), kCpuDevice));
  }
  std::string why;
  if (std::unique_ptr<Backend> simd = working_cpu_simd(opt, why)) return {std::move(simd), note};
  if (gles) {
    note.resize(note.rfind('\n') == std::string::npos ? 0 : note.rfind('\n'));  // gles runs after all
    skip("cpu-simd", why);
    return {std::move(gles), note};
  }
  skip("cpu-simd", why);
  return {make_cpu_backend(), note + "\nusing the CPU reference backend"};
}

}  // namespace sg
