// The GLES compute backend ("gles-compute"): executes Plans as GLSL ES 3.10 compute dispatches over shader storage
// buffers in the headless EGL context of the fragment backend (runtime/src/gles_backend.cpp is its model).
//
// Per compile: the device's compute limits -> ComputeLimits -> the glsl-es-compute Target -> target_policy (schedule
// and emit options) -> schedule -> the target's emitter (make_emitter: GLSL 4.50) per kernel -> KernelCache
// (glslang -> SPIR-V -> SPIRV-Cross -> GLSL ES 3.10) -> a linked compute program. Per run: upload the fed inputs,
// one glDispatchCompute per kernel (each followed by a storage barrier), read back only the program outputs, then
// swap the front/back buffers of every persistent value that was updated (update kernels write the back buffer: no
// kernel reads what it writes): plan_executor.h's run over storage buffers.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gles_backends.h"
#include "plan_executor.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/error.h"
#include "sg/feeds.h"
#include "sg/gles_device.h"
#include "sg/kernel_cache.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

using Storage = detail::BufferStorage<gles::Device, gles::Buffer>;
using Persistent = detail::PersistentValues<Storage>;

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
  detail::PlanSlots<Storage> slots_;
  std::vector<ComputeKernel> kernels_;
  std::vector<const gles::ComputeProgram*> programs_;
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
};

/// The device, programs and persistent values of the backend, shared by the backend and every executable it
/// compiled: an executable runs after the backend that made it is gone (sg::Backend's contract).
class GlesComputeContext final : public std::enable_shared_from_this<GlesComputeContext> {
 public:
  explicit GlesComputeContext(const BackendOptions& opt) : opt_(opt) {
    dev_ = gles::Device::create({});
    storage_.dev = dev_.get();
    const gles::Caps& c = dev_->caps();
    if (!c.compute)
      throw BackendError(fmt::format("gles-compute: '{}' gave an OpenGL ES {}.{} context; compute shaders need ES 3.1 "
                                     "(use --backend gles for the fragment-shader backend)",
                                     c.renderer, c.context_major, c.context_minor));
    limits_ = limits_from_caps(c);
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
    const Target t = target();
    const TargetPolicy policy = target_policy(t, opt_);  // the one policy (sg/backend.h)
    if (!emitter_) emitter_ = make_emitter(t, policy.emit);
    Plan plan = schedule(p, policy.schedule);
    auto exe = std::make_unique<GlesComputeExecutable>(shared_from_this(), std::move(plan));
    if (!dump_dir_.empty()) dump(*exe, fmt::format("{}/program{:02}", dump_dir_, dumps_++));
    return exe;
  }
  std::vector<float> read(const Tensor& leaf) { return persistent_.read(storage_, leaf); }
  void write(const Tensor& leaf, const std::vector<float>& data) { persistent_.write(storage_, leaf, data); }
  Storage& storage() { return storage_; }
  Persistent& persistent() { return persistent_; }

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
    dump_plan(*exe.plan(), dir, cache_, {.fragment = false, .compute = true, .compute_limits = emitter_->options().limits});
  }

  gles::Device& dev() { return *dev_; }
  /// The glsl-es-compute emitter (make_emitter under target_policy: the device's limits, BackendOptions::gpu_tiles
  /// applied); made by the first compile.
  const Emitter& emitter() const { return *emitter_; }
  bool profile() const { return opt_.profile; }

 private:
  BackendOptions opt_;
  std::unique_ptr<gles::Device> dev_;
  Storage storage_{};  // plan_executor.h's storage: dev_'s buffers
  ComputeLimits limits_;       // the device's: the schedule's
  std::unique_ptr<const Emitter> emitter_;  // the emitter's (limits_ with the policy's tile class)
  KernelCache cache_;
  std::unordered_map<std::string, gles::ComputeProgram> programs_;
  std::unordered_map<std::string, const gles::ComputeProgram*> by_code_;  // kernel_code_key -> program (in programs_)
  Persistent persistent_{"gles-compute"};  // after dev_: its buffers go before the device
  std::string dump_dir_;
  int dumps_ = 0;
};

GlesComputeExecutable::GlesComputeExecutable(std::shared_ptr<GlesComputeContext> be, Plan plan)
    : be_(std::move(be)), plan_(std::move(plan)), slots_(be_->storage(), be_->persistent(), plan_) {
  for (auto& k : plan_.kernels) {
    kernels_.push_back(be_->emitter().compute_kernel(plan_, k));
    const std::string key = be_->emitter().code_key(plan_, k);
    programs_.push_back(&be_->program_for(k, kernels_.back(), key));
  }
}

std::vector<std::vector<float>> GlesComputeExecutable::run(const std::vector<Feed>& feeds) {
  gles::Device& dev = be_->dev();
  std::vector<const gles::Buffer*> bind;
  return slots_.run(
      phases_, [&] { slots_.upload_feeds(feeds_, feeds); },
      [&] {
        timings_.clear();
        slots_.launch_each(
            [&](size_t k) {
              const Kernel& kern = plan_.kernels[k];
              const ComputeKernel& ck = kernels_[k];
              bind.clear();
              for (int v : ck.bindings) bind.push_back(&slots_.of(v));
              dev.dispatch(*programs_[k], bind, ck.workgroups, kern.name);
              if (be_->profile()) timings_.push_back({kern.name, dev.last_draw_ms(), dev.timer_queries_available()});
            },
            [this](int k, const auto& read) { notify_hook(k, plan_.kernels[k], plan_, read); });
      });
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
