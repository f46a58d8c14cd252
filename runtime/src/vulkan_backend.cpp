// The Vulkan backend: executes Plans as compute dispatches over storage buffers (sg/compute_kernel.h's contract).
//
// A step is recorded once into a command buffer per assignment of front/back buffers of the persistent values it
// touches (in practice two: the ping-pong parities) and replayed every step: uploads of the fed inputs (staging
// path: copies recorded in the step), the dispatches grouped into barrier epochs (dispatch_epochs.h: a barrier only
// where a dispatch reads or overwrites a buffer that one of the previous epoch wrote or read), then the readback of
// the program outputs.
// One submit and one fence wait per step. With a kernel hook installed the kernels are submitted one at a time (the
// hook reads values between them); with profiling on, timestamps surround every dispatch and every dispatch is
// separated by a barrier (so a kernel's time is its own). Which buffer holds which value, the front/back commits, the
// hook calls and the row-major readback are plan_executor.h's (VulkanStorage: device-local buffers).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/feeds.h"
#include "sg/kernel_cache.h"
#include "sg/vulkan_device.h"
#include "dispatch_epochs.h"
#include "env_flag.h"
#include "plan_executor.h"
#include "vulkan_autotune.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

/// plan_executor.h's storage: a storage buffer per slot (sizes in floats there, in bytes here).
struct VulkanStorage {
  using Slot = vk::Buffer;
  vk::Device* dev = nullptr;
  Slot create_value(const Value& v) { return dev->create_buffer(v.node->numel() * 4, v.name); }
  Slot create_pooled(const Plan& plan, int b) {
    return dev->create_buffer(plan.buffers[b].numel * 4, fmt::format("pool{}", b));
  }
  Slot create_leaf(const Node& leaf, const std::string& name, Extent, const Slot*) {
    return dev->create_buffer(leaf.numel() * 4, name);
  }
  bool covers(const Slot&, Extent) { return true; }
  void upload(Slot& s, const float* data, int64_t numel) { dev->upload(s, data, numel * 4); }
  void download(const Slot& s, float* data, int64_t numel) { dev->download(s, data, numel * 4); }
};
using Persistent = detail::PersistentValues<VulkanStorage>;

/// The limits kernels are scheduled for: the device's, each clamped by VulkanOptions::max_limits when given.
ComputeLimits clamp_limits(ComputeLimits d, const std::optional<ComputeLimits>& cap) {
  if (!cap) return d;
  d.max_storage_buffers = std::min(d.max_storage_buffers, cap->max_storage_buffers);
  d.max_workgroup_invocations = std::min(d.max_workgroup_invocations, cap->max_workgroup_invocations);
  d.max_shared_bytes = std::min(d.max_shared_bytes, cap->max_shared_bytes);
  d.max_workgroup_count = std::min(d.max_workgroup_count, cap->max_workgroup_count);
  d.max_buffer_bytes = std::min(d.max_buffer_bytes, cap->max_buffer_bytes);
  return d;
}

class VulkanContext;

class VulkanExecutable final : public Executable {
 public:
  VulkanExecutable(std::shared_ptr<VulkanContext> be, Plan plan, std::vector<ComputeKernel> kernels,
                   std::vector<const vk::Pipeline*> pipelines);
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) override;
  int kernels_per_step() const override { return static_cast<int>(plan_.kernels.size()); }
  const Plan* plan() const override { return &plan_; }
  std::vector<KernelTiming> last_timings() const override { return timings_; }
  std::vector<std::pair<std::string, double>> last_phases() const override { return phases_; }
  const std::vector<ComputeKernel>* compute_kernels() const override { return &kernels_; }

 private:
  /// The descriptor sets of one assignment of front/back buffers, and the step recorded with them.
  struct Variant {
    vk::DescriptorPool pool;
    std::vector<VkDescriptorSet> sets;  // per kernel
    vk::CommandBuffer cmd;              // recorded on first use (VulkanOptions::record_steps)
  };
  vk::Device& dev();
  Variant& variant();
  void write_inputs(const std::vector<Feed>& feeds);
  std::vector<size_t> program_order(size_t k0, size_t k1) const;
  std::vector<size_t> barrier_epoch_order(size_t k0, size_t k1);
  void record(vk::CommandBuffer& cmd, const Variant& var, size_t k0, size_t k1, bool timestamps);
  void submit_per_kernel(Variant& var, bool timestamps);
  void collect_timestamps();

  std::shared_ptr<VulkanContext> be_;  ///< first: destroyed last, after every Vulkan object below
  Plan plan_;
  FeedChecker feeds_{plan_.program};                      ///< run()'s feed validation, shared by every backend
  std::vector<ComputeKernel> kernels_;
  std::vector<const vk::Pipeline*> pipelines_;
  detail::PlanSlots<VulkanStorage> slots_;            // the buffer of every value (plan_executor.h)
  std::unordered_map<int, vk::Buffer> in_staging_;    // staging path: fed inputs, by value id
  std::unordered_map<int, vk::Buffer> out_staging_;   // staging path: program outputs, by value id
  std::map<std::vector<uint8_t>, Variant> variants_;  // by slots_.fronts()
  vk::CommandBuffer scratch_;                         // unrecorded steps, per-kernel submits
  vk::QueryPool queries_;                             // 2 timestamps per kernel and repeat (profiling)
  int repeats_ = 1;                                   // VulkanOptions::repeat_dispatches
  int last_repeats_ = 1;                              // repeats of the last recorded command buffer
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
};

/// The device, pipelines and persistent values of a Vulkan backend, shared by the backend and every executable it
/// compiled: an executable runs after the backend that made it is gone (sg::Backend's contract).
class VulkanContext final : public std::enable_shared_from_this<VulkanContext> {
 public:
  explicit VulkanContext(const BackendOptions& opt) : opt_(opt) {
    vk::DeviceOptions d;
    d.validation = opt.vulkan.validation ? int{*opt.vulkan.validation} : -1;
    d.device = opt.vulkan.device;
    d.direct_map = opt.vulkan.direct_map ? int{*opt.vulkan.direct_map} : -1;
    d.pipeline_cache_dir = cache_.disk_dir();  // the VkPipelineCache file lives next to the kernel cache
    d.memory_policy = opt.vulkan.memory_policy;
    if (opt.vulkan.repeat_dispatches < 1)
      throw ValueError(fmt::format("vulkan: VulkanOptions::repeat_dispatches must be >= 1, got {}",
                                   opt.vulkan.repeat_dispatches));
    dev_ = vk::Device::create(d);
    storage_.dev = dev_.get();
    limits_ = clamp_limits(dev_->caps().limits, opt.vulkan.max_limits);
    if (!opt.vulkan.subgroups.value_or(env_flag("SG_VULKAN_SUBGROUPS").value_or(true)))
      limits_.subgroup_arithmetic = false;
    autotune_ = opt.autotune.value_or(env_flag("SG_AUTOTUNE").value_or(false));
    // SG_TILE_CONFIG stands in for VulkanOptions::tiles, which target_policy hands the emitter
    if (const char* t = std::getenv("SG_TILE_CONFIG"); !opt_.vulkan.tiles && t && *t) {
      opt_.vulkan.tiles = parse_tile_config(t);
      if (!opt_.vulkan.tiles)
        throw ValueError(fmt::format("vulkan: SG_TILE_CONFIG='{}' is not a tile configuration; write it as "
                                     "TXxTY.TMxTN.kBK.gG[.v4][.pf], e.g. 16x16.8x8.k8.g8.v4.pf", t));
    }
    dump_dir_ = opt.dump_dir;
    if (dump_dir_.empty())
      if (const char* e = std::getenv("SG_DUMP")) dump_dir_ = e;
  }
  std::string name() const { return "vulkan"; }
  std::string device() const { return dev_->caps().name; }
  std::unique_ptr<Executable> compile(const Program& p);
  std::vector<float> read(const Tensor& leaf) { return persistent_.read(storage_, leaf); }
  void write(const Tensor& leaf, const std::vector<float>& data) { persistent_.write(storage_, leaf, data); }

  vk::Device& dev() { return *dev_; }
  VulkanStorage& storage() { return storage_; }
  /// The front/back buffers of the Param/State leaves (plan_executor.h).
  Persistent& persistent() { return persistent_; }
  const BackendOptions& options() const { return opt_; }

 private:
  /// The pipeline of kernel k: one per kernel_code_key (kernels equal up to the names of their values share the
  /// first one's; descriptors are bound by position).
  const vk::Pipeline& pipeline_for(const Kernel& k, const ComputeKernel& ck, const std::string& code_key);
  std::vector<ComputeKernel> emit_kernels(const Plan& plan);

  BackendOptions opt_;
  KernelCache cache_;  // env SG_KERNEL_CACHE: SPIR-V on disk, and the VkPipelineCache file beside it
  std::unique_ptr<vk::Device> dev_;
  ComputeLimits limits_;
  /// The spirv-vulkan emitter (make_emitter under target_policy: limits_ with BackendOptions::gpu_tiles applied,
  /// VulkanOptions::tiles or SG_TILE_CONFIG); made by the first compile.
  std::unique_ptr<const Emitter> emitter_;
  std::unordered_map<const CompiledShader*, vk::Pipeline> pipelines_;  // never evicted (as GLES programs)
  std::unordered_map<std::string, const vk::Pipeline*> by_code_;      // kernel_code_key -> pipeline (in pipelines_)
  VulkanStorage storage_;
  Persistent persistent_{"vulkan"};  // after dev_: its buffers go before the device
  std::string dump_dir_;
  int dumps_ = 0;
  bool autotune_ = false;  ///< BackendOptions::autotune / SG_AUTOTUNE
};

/// The Vulkan name of the limit a ComputeLimits field stands for, with the device's value (for error messages).
std::string limits_note(const vk::Caps& c, const ComputeLimits& l) {
  return fmt::format("device {}: maxPerStageDescriptorStorageBuffers {}, maxComputeWorkGroupInvocations {}, "
                     "maxComputeWorkGroupCount {}, maxComputeSharedMemorySize {}, maxStorageBufferRange {}",
                     c.name, l.max_storage_buffers, l.max_workgroup_invocations, l.max_workgroup_count,
                     l.max_shared_bytes, l.max_buffer_bytes);
}

/// Every kernel of the plan emitted for the device's limits; errors name the kernel and the Vulkan limit.
std::vector<ComputeKernel> VulkanContext::emit_kernels(const Plan& plan) {
  std::vector<ComputeKernel> out;
  for (auto& k : plan.kernels) {
    ComputeKernel ck;
    try {
      ck = emitter_->compute_kernel(plan, k);
      if (autotune_ && !emitter_->options().tiles) ck = vk::autotune_kernel(*dev_, cache_, plan, k, *emitter_, std::move(ck));
    } catch (const UnsupportedError& e) {
      throw UnsupportedError(fmt::format("vulkan: {} ({})", e.what(), limits_note(dev_->caps(), limits_)));
    }
    const int64_t inv = int64_t{ck.local_size[0]} * ck.local_size[1] * ck.local_size[2];
    if (inv > limits_.max_workgroup_invocations)
      throw UnsupportedError(fmt::format("vulkan: kernel {} runs {} invocations per workgroup; {} allows {} "
                                         "(maxComputeWorkGroupInvocations)", k.name, inv, dev_->caps().name,
                                         limits_.max_workgroup_invocations));
    for (int d = 0; d < 3; ++d)
      if (ck.workgroups[d] > limits_.max_workgroup_count)
        throw UnsupportedError(fmt::format("vulkan: kernel {} dispatches {} workgroups in dimension {}; {} allows {} "
                                           "(maxComputeWorkGroupCount)", k.name, ck.workgroups[d], d,
                                           dev_->caps().name, limits_.max_workgroup_count));
    if (ck.bindings.size() != k.inputs.size() + k.outputs.size())
      throw CompileError(fmt::format("vulkan: kernel {}: {} bindings, expected inputs + outputs = {}", k.name,
                                     ck.bindings.size(), k.inputs.size() + k.outputs.size()));
    out.push_back(std::move(ck));
  }
  return out;
}

const vk::Pipeline& VulkanContext::pipeline_for(const Kernel& k, const ComputeKernel& ck, const std::string& code_key) {
  try {
    if (auto hit = by_code_.find(code_key); hit != by_code_.end()) return *hit->second;
    const CompiledShader& c = cache_.get_or_compile(k.name, ck.source, ShaderStage::Compute);
    auto it = pipelines_.find(&c);
    if (it == pipelines_.end())
      it = pipelines_
               .emplace(&c, dev_->create_pipeline(c.spirv, static_cast<int>(ck.bindings.size()), ck.local_size, k.name))
               .first;
    return *by_code_.emplace(code_key, &it->second).first->second;
  } catch (const CompileError& e) {
    // name the graph nodes (and the user's lines) the failing kernel computes
    throw CompileError(fmt::format("{}\ngraph nodes in kernel {}:\n{}", e.what(), k.name, k.comment));
  }
}

std::unique_ptr<Executable> VulkanContext::compile(const Program& p) {
  ScheduleOptions so;
  try {
    DeviceCaps caps;  // the spirv-vulkan target of this device; the one policy turns it into schedule and emit options
    caps.renderer = dev_->caps().name;
    caps.cpu_device = limits_.cpu_device;
    caps.compute = limits_;
    const Target target = make_target(TargetName::SpirvVulkan, caps);
    const TargetPolicy policy = target_policy(target, opt_);
    so = policy.schedule;
    if (!emitter_) emitter_ = make_emitter(target, policy.emit);
  } catch (const ValueError& e) {
    throw UnsupportedError(fmt::format("vulkan: {} ({}): the device cannot run compute kernels", e.what(),
                                       limits_note(dev_->caps(), limits_)));
  }
  Plan plan = schedule(p, so);
  if (!dump_dir_.empty())
    dump_plan(plan, fmt::format("{}/program{:02}", dump_dir_, dumps_++), cache_,
              {.fragment = false, .compute = true, .compute_limits = emitter_->options().limits});
  // every buffer must fit one storage-buffer binding
  auto check_range = [&](int64_t floats, const std::string& what) {
    const int64_t bytes = (floats * 4 + 15) / 16 * 16;
    if (bytes > limits_.max_buffer_bytes)
      throw UnsupportedError(fmt::format("vulkan: {} needs a storage buffer of {} bytes; {} allows {} bytes per binding "
                                         "(maxStorageBufferRange)", what, bytes, dev_->caps().name, limits_.max_buffer_bytes));
  };
  for (auto& v : plan.values) {
    if (v.planes > 1)
      throw CompileError(fmt::format("vulkan: value {} has row planes, which compute targets do not use", v.name));
    check_range(v.node->numel(), fmt::format("value {} ({} {})", v.name, v.node->describe(), shape_str(v.node->shape)));
  }
  for (size_t b = 0; b < plan.buffers.size(); ++b) check_range(plan.buffers[b].numel, fmt::format("pooled buffer {}", b));
  std::vector<ComputeKernel> kernels = emit_kernels(plan);
  std::vector<const vk::Pipeline*> pipes;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const Kernel& kern = plan.kernels[k];
    // an autotuned kernel's tiles are its own: its key is its source
    const std::string key =
        kernels[k].tuning.empty()
            ? emitter_->code_key(plan, kern)
            : "autotuned\n" + kernels[k].source;
    pipes.push_back(&pipeline_for(kern, kernels[k], key));
  }
  dev_->save_pipeline_cache();
  return std::make_unique<VulkanExecutable>(shared_from_this(), std::move(plan), std::move(kernels), std::move(pipes));
}

VulkanExecutable::VulkanExecutable(std::shared_ptr<VulkanContext> be, Plan plan, std::vector<ComputeKernel> kernels,
                                   std::vector<const vk::Pipeline*> pipelines)
    : be_(std::move(be)),
      plan_(std::move(plan)),
      kernels_(std::move(kernels)),
      pipelines_(std::move(pipelines)),
      slots_(be_->storage(), be_->persistent(), plan_) {
  vk::Device& d = dev();
  const bool staging = !d.caps().direct_map;
  if (staging)
    for (auto& v : plan_.values)
      if (v.kind == ValueKind::Input)
        in_staging_.emplace(v.id, d.create_staging_buffer(v.node->numel() * 4, v.name + ".staging", false));
  if (staging)
    for (int id : plan_.output_values)
      if (!out_staging_.count(id))
        out_staging_.emplace(id, d.create_staging_buffer(plan_.values[id].node->numel() * 4,
                                                         plan_.values[id].name + ".readback", true));
  repeats_ = be_->options().vulkan.repeat_dispatches;
  scratch_ = d.create_command_buffer();
  if (be_->options().profile && d.caps().timestamps)
    queries_ = d.create_timestamp_pool(static_cast<uint32_t>(2 * std::max<size_t>(plan_.kernels.size(), 1) * repeats_));
}

vk::Device& VulkanExecutable::dev() { return be_->dev(); }

VulkanExecutable::Variant& VulkanExecutable::variant() {
  auto key = slots_.fronts();
  auto it = variants_.find(key);
  if (it != variants_.end()) return it->second;
  Variant var;
  int descriptors = 0;
  for (auto& ck : kernels_) descriptors += static_cast<int>(ck.bindings.size());
  var.pool = dev().create_descriptor_pool(static_cast<int>(kernels_.size()), descriptors);
  for (size_t k = 0; k < kernels_.size(); ++k) {
    std::vector<const vk::Buffer*> bufs;
    for (int id : kernels_[k].bindings) bufs.push_back(&slots_.of(id));
    var.sets.push_back(dev().allocate_set(var.pool, *pipelines_[k], bufs));
  }
  return variants_.emplace(std::move(key), std::move(var)).first->second;
}

/// Kernels [k0, k1) in program order.
std::vector<size_t> VulkanExecutable::program_order(size_t k0, size_t k1) const {
  std::vector<size_t> order(k1 - k0);
  std::iota(order.begin(), order.end(), k0);
  return order;
}

/// Kernels [k0, k1) grouped into barrier epochs over the buffers they bind (dispatch_epochs.h): as few barriers as
/// the kernels' read/write conflicts allow, independent kernels side by side.
std::vector<size_t> VulkanExecutable::barrier_epoch_order(size_t k0, size_t k1) {
  std::vector<detail::DispatchAccess<VkBuffer>> access(k1 - k0);
  for (size_t k = k0; k < k1; ++k) {
    const size_t nin = plan_.kernels[k].inputs.size();
    const auto& bindings = kernels_[k].bindings;
    for (size_t b = 0; b < bindings.size(); ++b)
      (b < nin ? access[k - k0].reads : access[k - k0].writes).push_back(slots_.of(bindings[b]).handle());
  }
  std::vector<size_t> order = detail::epoch_order(detail::dispatch_epochs(access));
  for (auto& k : order) k += k0;
  return order;
}

/// Records kernels [k0, k1) of the step: the inputs' staging copies first when k0 == 0, the outputs' readback copies
/// last when k1 == all kernels, and the kernels in barrier epochs (barrier_epoch_order) with a barrier wherever a
/// dispatch reads or overwrites a buffer that an earlier one since the last barrier wrote or read (with timestamps:
/// in program order, a barrier between all dispatches, each surrounded by two).
void VulkanExecutable::record(vk::CommandBuffer& cmd, const Variant& var, size_t k0, size_t k1, bool timestamps) {
  cmd.begin();
  cmd.barrier();  // the previous step's (or transfer's) writes are visible
  if (k0 == 0 && !in_staging_.empty()) {
    for (auto& [id, st] : in_staging_) cmd.copy(st, slots_.of(id), plan_.values[id].node->numel() * 4);
    cmd.barrier();
  }
  // the whole step may be dispatched several times back to back (VulkanOptions::repeat_dispatches): the same kernels
  // over the same buffers, so the outputs are those of one step; timestamps 2 (rep * K + k) and + 1
  const size_t K = kernels_.size();
  const int reps = k0 == 0 && k1 == K ? repeats_ : 1;
  last_repeats_ = reps;
  if (timestamps) {
    if (reps > 1) cmd.reset_queries(queries_, 0, static_cast<uint32_t>(2 * K * reps));
    else cmd.reset_queries(queries_, static_cast<uint32_t>(2 * k0), static_cast<uint32_t>(2 * (k1 - k0)));
  }
  const std::vector<size_t> order = timestamps ? program_order(k0, k1) : barrier_epoch_order(k0, k1);
  std::set<VkBuffer> written, read;
  bool first = true;
  for (size_t i = 0; i < (k1 - k0) * reps; ++i) {
    const size_t k = order[i % (k1 - k0)];
    const uint32_t q = static_cast<uint32_t>(2 * ((i / (k1 - k0)) * K + k));
    const ComputeKernel& ck = kernels_[k];
    const size_t nin = plan_.kernels[k].inputs.size();
    bool hazard = timestamps;
    for (size_t b = 0; b < ck.bindings.size(); ++b) {
      VkBuffer h = slots_.of(ck.bindings[b]).handle();
      hazard |= written.count(h) > 0 || (b >= nin && read.count(h) > 0);
    }
    if (hazard && !first) {
      cmd.barrier();
      written.clear();
      read.clear();
    }
    first = false;
    for (size_t b = 0; b < ck.bindings.size(); ++b)
      (b < nin ? read : written).insert(slots_.of(ck.bindings[b]).handle());
    if (timestamps) cmd.timestamp(queries_, q);
    cmd.dispatch(*pipelines_[k], var.sets[k], ck.workgroups);
    if (timestamps) cmd.timestamp(queries_, q + 1);
  }
  if (k1 == kernels_.size() && !out_staging_.empty()) {
    cmd.barrier();
    for (auto& [id, st] : out_staging_) cmd.copy(slots_.of(id), st, plan_.values[id].node->numel() * 4);
  }
  cmd.barrier_to_host();
  cmd.end();
}

/// The fed inputs written to their mapped buffers (staging path: the staging buffers the step copies from).
void VulkanExecutable::write_inputs(const std::vector<Feed>& feeds) {
  slots_.for_each_feed(feeds_, feeds, [this](int id, const std::vector<float>& data) {  // ValueError before any write
    // the GPU is idle between steps (every submit is waited for), so host writes cannot race a dispatch
    void* dst = in_staging_.count(id) ? in_staging_.at(id).mapped() : slots_.of(id).mapped();
    std::copy(data.begin(), data.end(), static_cast<float*>(dst));
  });
}

/// Runs the step one kernel per submit, calling the hook after each (and timing each on the CPU without timestamps).
void VulkanExecutable::submit_per_kernel(Variant& var, bool timestamps) {
  using Clock = std::chrono::steady_clock;
  slots_.launch_each(
      [&](size_t k) {
        record(scratch_, var, k, k + 1, timestamps);
        const auto t0 = Clock::now();
        dev().submit_and_wait(scratch_);
        if (be_->options().profile && !timestamps)
          timings_.push_back(
              {plan_.kernels[k].name, std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), false});
      },
      [this](int k, const auto& read) { notify_hook(k, plan_.kernels[k], plan_, read); });
}

/// Per kernel: its time (the mean over the step's back-to-back repeats) and its start in the first repeat.
void VulkanExecutable::collect_timestamps() {
  const size_t K = kernels_.size();
  const uint32_t n = static_cast<uint32_t>(2 * K * last_repeats_);
  std::vector<double> ns = dev().read_timestamps_ns(queries_, 0, n);
  for (size_t k = 0; k < K; ++k) {
    double total = 0;
    for (int r = 0; r < last_repeats_; ++r) total += ns[2 * (r * K + k) + 1] - ns[2 * (r * K + k)];
    timings_.push_back({plan_.kernels[k].name, total / last_repeats_ * 1e-6, true, (ns[2 * k] - ns[0]) * 1e-6});
  }
}

std::vector<std::vector<float>> VulkanExecutable::run(const std::vector<Feed>& feeds) {
  timings_.clear();
  auto submit = [&] {
    Variant& var = variant();
    const bool profile = be_->options().profile;
    const bool timestamps = profile && queries_.handle() != VK_NULL_HANDLE;
    if ((hook_ || (profile && !timestamps)) && !kernels_.empty()) {
      submit_per_kernel(var, timestamps);  // the last kernel's command buffer also copies the outputs back
    } else if (be_->options().vulkan.record_steps) {
      if (!var.cmd.recorded()) {  // recorded once per parity, replayed every step
        var.cmd = dev().create_command_buffer();
        record(var.cmd, var, 0, kernels_.size(), timestamps);
      }
      dev().submit_and_wait(var.cmd);
    } else {
      record(scratch_, var, 0, kernels_.size(), timestamps);
      dev().submit_and_wait(scratch_);
    }
    if (timestamps) collect_timestamps();
  };
  // a program output right after the step: on the staging path already copied to its readback buffer
  auto download = [this](const vk::Buffer& b, int id, float* dst, int64_t numel) {
    if (auto it = out_staging_.find(id); it != out_staging_.end()) {
      const float* src = static_cast<const float*>(it->second.mapped());
      std::copy(src, src + numel, dst);
    } else {
      dev().download(b, dst, numel * 4);
    }
  };
  return slots_.run(phases_, [&] { write_inputs(feeds); }, submit, download);
}

using VulkanBackend = SharedContextBackend<VulkanContext>;

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& opt) { return std::make_unique<VulkanBackend>(opt); }

vk::Device& vulkan_device(Backend& backend) {
  auto* v = dynamic_cast<VulkanBackend*>(&backend);
  if (!v) throw ValueError("vulkan_device: backend '" + backend.name() + "' is not a Vulkan backend");
  return v->context().dev();
}

}  // namespace sg
