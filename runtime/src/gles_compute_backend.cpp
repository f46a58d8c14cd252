// The GLES compute backend ("gles-compute"): executes Plans as GLSL ES 3.10 compute dispatches over shader storage
// buffers in the headless EGL context of the fragment backend (runtime/src/gles_backend.cpp is its model).
//
// Per compile: the device's compute limits -> ComputeLimits -> compute_schedule_options -> schedule -> one
// emit_compute_kernel per kernel (GLSL 4.50) -> KernelCache (glslang -> SPIR-V -> SPIRV-Cross -> GLSL ES 3.10) ->
// a linked compute program. Per run: upload the fed inputs, one glDispatchCompute per kernel (each followed by a
// storage barrier), read back only the program outputs, then swap the front/back buffers of every persistent value
// that was updated (update kernels write the back buffer: no kernel reads what it writes).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gles_backends.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/dump.h"
#include "sg/emit.h"
#include "sg/error.h"
#include "sg/feeds.h"
#include "sg/gles_device.h"
#include "sg/kernel_cache.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

/// A persistent value's two buffers; `front` holds the current value.
struct PersistentBuffers {
  gles::Buffer front, back;
};

class GlesComputeContext;

class GlesComputeExecutable final : public Executable {
 public:
  GlesComputeExecutable(std::shared_ptr<GlesComputeContext> be, Plan plan);
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) override;
  int kernels_per_step() const override { return static_cast<int>(plan_.kernels.size()); }
  const Plan* plan() const override { return &plan_; }
  std::vector<KernelTiming> last_timings() const override { return timings_; }
  std::vector<std::pair<std::string, double>> last_phases() const override { return phases_; }
  const std::vector<ComputeKernel>* compute_kernels() const override { return &kernels_; }

 private:
  std::shared_ptr<GlesComputeContext> be_;  ///< first: destroyed last, after every device object below
  Plan plan_;
  FeedChecker feeds_{plan_.program};  ///< run()'s feed validation, shared by every backend (sg/feeds.h)
  std::unordered_map<const Node*, int> plan_values_;  ///< Input leaf -> its value id in plan_
  std::vector<ComputeKernel> kernels_;
  std::vector<const gles::ComputeProgram*> programs_;
  std::vector<gles::Buffer> pool_;                  // pooled temporaries
  std::unordered_map<int, gles::Buffer> own_;       // inputs and constants, by value id
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
  gles::Buffer& buffer_of(int value_id);
  std::vector<float> read_value(int value_id);
};

/// The device, programs and persistent values of the backend, shared by the backend and every executable it
/// compiled: an executable runs after the backend that made it is gone (sg::Backend's contract).
class GlesComputeContext final : public std::enable_shared_from_this<GlesComputeContext> {
 public:
  explicit GlesComputeContext(const BackendOptions& opt) : opt_(opt) {
    dev_ = gles::Device::create({});
    const gles::Caps& c = dev_->caps();
    if (!c.compute)
      throw BackendError(fmt::format("gles-compute: '{}' gave an OpenGL ES {}.{} context; compute shaders need ES 3.1 "
                                     "(use --backend gles for the fragment-shader backend)",
                                     c.renderer, c.context_major, c.context_minor));
    limits_ = limits_from_caps(c);
    emit_limits_ = limits_;
    if (opt.gpu_tiles) emit_limits_.cpu_device = !*opt.gpu_tiles;
    if (limits_.max_storage_buffers < 2)
      throw BackendError(fmt::format("gles-compute: GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS = {} on '{}'; a kernel needs "
                                     "at least 2 storage buffers",
                                     limits_.max_storage_buffers, c.renderer));
    dev_->set_profiling(opt.profile);
    dump_dir_ = opt.dump_dir;
    if (dump_dir_.empty())
      if (const char* e = std::getenv("SG_DUMP")) dump_dir_ = e;
  }

  /// ComputeLimits of a GLES 3.1 device (the smallest per-dimension workgroup count is the contract's one number).
  static ComputeLimits limits_from_caps(const gles::Caps& c) {
    ComputeLimits l;
    l.max_storage_buffers = static_cast<int>(c.max_compute_storage_blocks);
    l.max_workgroup_invocations = static_cast<int>(c.max_compute_invocations);
    l.max_shared_bytes = c.max_compute_shared_bytes;
    l.max_workgroup_count = *std::min_element(c.max_compute_workgroup_count.begin(), c.max_compute_workgroup_count.end());
    l.max_buffer_bytes = c.max_storage_block_bytes;
    l.subgroup_size = 0;
    l.cpu_device = is_cpu_renderer(c.renderer);
    return l;
  }

  std::string name() const { return "gles-compute"; }
  std::string device() const { return dev_->caps().renderer; }
  /// The glsl-es-compute target of this device (its limits; the one schedule policy reads it).
  Target target() const {
    DeviceCaps caps;
    caps.renderer = dev_->caps().renderer;
    caps.cpu_device = limits_.cpu_device;
    caps.compute = limits_;
    return make_target(TargetName::GlslEsCompute, caps);
  }
  std::unique_ptr<Executable> compile(const Program& p) {
    Plan plan = schedule(p, schedule_options(target(), opt_));
    auto exe = std::make_unique<GlesComputeExecutable>(shared_from_this(), std::move(plan));
    if (!dump_dir_.empty()) dump(*exe, fmt::format("{}/program{:02}", dump_dir_, dumps_++));
    return exe;
  }
  std::vector<float> read(const Tensor& leaf) {
    PersistentBuffers& p = persistent(leaf.node());
    std::vector<float> out(leaf.numel());
    dev_->download(p.front, out.data(), leaf.numel());
    return out;
  }
  void write(const Tensor& leaf, const std::vector<float>& data) {
    if (static_cast<int64_t>(data.size()) != leaf.numel())
      throw ValueError(fmt::format("write: {} expects {} values, got {}", leaf.node()->describe(), leaf.numel(),
                                   data.size()));
    dev_->upload(persistent(leaf.node()).front, data.data(), leaf.numel());
  }

  /// The front/back buffers of a Param/State leaf, created (with its initial data) on first use.
  PersistentBuffers& persistent(const NodePtr& n) {
    auto it = state_.find(n.get());
    if (it != state_.end()) return it->second;
    if (!n->data) throw ValueError("gles-compute: " + n->describe() + " is not a parameter or state");
    PersistentBuffers p;
    p.front = dev_->create_buffer(n->numel(), n->name);
    p.back = dev_->create_buffer(n->numel(), n->name + ".back");
    dev_->upload(p.front, n->data->data(), n->numel());
    keep_.push_back(n);
    return state_.emplace(n.get(), std::move(p)).first->second;
  }

  /// The linked program of a compute kernel (compiled once per distinct GLSL ES source).
  /// Kernels equal up to the names of their values (`code_key`, kernel_code_key) share the program of the first one:
  /// storage buffers are bound by position.
  const gles::ComputeProgram& program_for(const Kernel& k, const ComputeKernel& ck, const std::string& code_key) {
    try {
      auto by_code = by_code_.find(code_key);
      if (by_code == by_code_.end()) {
        const CompiledShader& c = cache_.get_or_compile(k.name, ck.source, ShaderStage::Compute);
        auto it = programs_.find(c.gles);
        if (it == programs_.end()) it = programs_.emplace(c.gles, dev_->create_compute_program(c.gles, k.name)).first;
        by_code = by_code_.emplace(code_key, &it->second).first;
      }
      const auto& ls = by_code->second->local_size();
      if (ls[0] != ck.local_size[0] || ls[1] != ck.local_size[1] || ls[2] != ck.local_size[2])
        throw BackendError(fmt::format("gles-compute: kernel {} links with workgroup size {}x{}x{}, emitted {}x{}x{}", k.name,
                                       ls[0], ls[1], ls[2], ck.local_size[0], ck.local_size[1], ck.local_size[2]));
      return *by_code->second;
    } catch (const CompileError& e) {
      throw CompileError(fmt::format("{}\ngraph nodes in kernel {}:\n{}", e.what(), k.name, k.comment));
    }
  }

  /// SG_DUMP / BackendOptions::dump_dir: the compute kernels that run (sg/dump.h: NAME.glsl, .spv, .spvasm, .comp
  /// and plan.json), emitted for the limits the backend emits for.
  void dump(const Executable& exe, const std::string& dir) {
    dump_plan(*exe.plan(), dir, cache_, {.fragment = false, .compute = true, .compute_limits = emit_limits_});
  }

  gles::Device& dev() { return *dev_; }
  /// The limits kernels are emitted for (the device's, with BackendOptions::gpu_tiles applied).
  const ComputeLimits& emit_limits() const { return emit_limits_; }
  bool profile() const { return opt_.profile; }

 private:
  BackendOptions opt_;
  std::unique_ptr<gles::Device> dev_;
  ComputeLimits limits_;       // the device's: the schedule's
  ComputeLimits emit_limits_;  // the emitter's
  KernelCache cache_;
  std::unordered_map<std::string, gles::ComputeProgram> programs_;
  std::unordered_map<std::string, const gles::ComputeProgram*> by_code_;  // kernel_code_key -> program (in programs_)
  std::unordered_map<const Node*, PersistentBuffers> state_;
  std::vector<NodePtr> keep_;  // keeps persistent nodes alive while their buffers exist
  std::string dump_dir_;
  int dumps_ = 0;
};

GlesComputeExecutable::GlesComputeExecutable(std::shared_ptr<GlesComputeContext> be, Plan plan)
    : be_(std::move(be)), plan_(std::move(plan)) {
  gles::Device& dev = be_->dev();
  for (auto& b : plan_.buffers) pool_.push_back(dev.create_buffer(b.numel, "pool"));
  for (auto& v : plan_.values) {
    if (v.kind == ValueKind::Input) {
      own_.emplace(v.id, dev.create_buffer(v.node->numel(), v.name));
      plan_values_.emplace(v.node.get(), v.id);
    }
    if (v.kind == ValueKind::Constant) {
      gles::Buffer b = dev.create_buffer(v.node->numel(), v.name);
      dev.upload(b, v.node->data->data(), v.node->numel());
      own_.emplace(v.id, std::move(b));
    }
    if (v.kind == ValueKind::Persistent) be_->persistent(v.node);
  }
  for (auto& k : plan_.kernels) {
    kernels_.push_back(emit_compute_kernel(plan_, k, be_->emit_limits()));
    const std::string key =
        kernel_code_key(plan_, k, [&] { return emit_compute_kernel(plan_, k, be_->emit_limits()).source; });
    programs_.push_back(&be_->program_for(k, kernels_.back(), key));
  }
}

gles::Buffer& GlesComputeExecutable::buffer_of(int id) {
  const Value& v = plan_.values[id];
  switch (v.kind) {
    case ValueKind::Input:
    case ValueKind::Constant: return own_.at(id);
    case ValueKind::Persistent: return be_->persistent(v.node).front;
    case ValueKind::Temp:
      if (v.update_of >= 0) return be_->persistent(plan_.values[v.update_of].node).back;
      return pool_.at(v.buffer);
  }
  throw BackendError("gles-compute: unknown value kind");
}

std::vector<float> GlesComputeExecutable::read_value(int id) {
  std::vector<float> v(plan_.values[id].node->numel());
  be_->dev().download(buffer_of(id), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

std::vector<std::vector<float>> GlesComputeExecutable::run(const std::vector<Feed>& feeds) {
  gles::Device& dev = be_->dev();
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  phases_.clear();
  Clock::time_point t0 = Clock::now();
  const std::vector<const std::vector<float>*> data = feeds_.check(feeds);  // ValueError before any upload
  for (size_t i = 0; i < feeds_.inputs().size(); ++i) {
    const Node* n = feeds_.inputs()[i].get();
    if (auto it = plan_values_.find(n); it != plan_values_.end()) dev.upload(own_.at(it->second), data[i]->data(), n->numel());
  }
  phases_.emplace_back("upload", ms_since(t0));
  t0 = Clock::now();
  timings_.clear();
  std::vector<const gles::Buffer*> bind;
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    const Kernel& kern = plan_.kernels[k];
    const ComputeKernel& ck = kernels_[k];
    bind.clear();
    for (int v : ck.bindings) bind.push_back(&buffer_of(v));
    dev.dispatch(*programs_[k], bind, ck.workgroups, kern.name);
    if (be_->profile()) timings_.push_back({kern.name, dev.last_draw_ms(), dev.timer_queries_available()});
    notify_hook(static_cast<int>(k), kern, plan_, [this](int v) { return read_value(v); });
  }
  phases_.emplace_back("submit", ms_since(t0));
  t0 = Clock::now();
  std::vector<std::vector<float>> out;
  for (int id : plan_.output_values) out.push_back(read_value(id));
  phases_.emplace_back("readback", ms_since(t0));
  for (auto& [target, value] : plan_.updates) {
    PersistentBuffers& p = be_->persistent(plan_.values[target].node);
    std::swap(p.front, p.back);
  }
  return out;
}

using GlesComputeBackend = SharedContextBackend<GlesComputeContext>;

}  // namespace

std::unique_ptr<Backend> make_gles_compute_backend(const BackendOptions& opt) {
  return std::make_unique<GlesComputeBackend>(opt);
}

namespace detail {

std::optional<gles::LiveObjects> gles_compute_live_objects(Backend& backend) {
  auto* g = dynamic_cast<GlesComputeBackend*>(&backend);
  if (!g) return std::nullopt;
  return g->context().dev().live_objects();
}

}  // namespace detail

}  // namespace sg
