// The GLES backend: executes Plans as fragment-shader passes over RGBA32F textures (headless EGL). Which texture holds
// which value, the persistent values' front/back commits, the hook calls and the row-major readback (row planes
// interleaved back, transposed temporaries transposed) are plan_executor.h's; TextureStorage lays the textures out.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "gles_backends.h"
#include "plan_executor.h"
#include "sg/backend.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/feeds.h"
#include "sg/gles_device.h"
#include "sg/kernel_cache.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

/// plan_executor.h's storage: an RGBA32F texture per slot, laid out and allocated as the plan says.
struct TextureStorage {
  using Slot = gles::Texture;
  gles::Device* dev = nullptr;
  const ScheduleOptions* so = nullptr;  ///< the options compile() schedules with (the persistent values' layout)
  Slot create_value(const Value& v) { return dev->create_texture(v.layout, v.name); }
  Slot create_pooled(const Plan& plan, int b) {  // allocated for the largest draw writing the buffer
    return dev->create_texture(plan.buffers[b], "pool", plan.buffer_extents[b].width, plan.buffer_extents[b].height);
  }
  /// A leaf's texture: the plan's layout for its shape (TextureLayout::for_shape with the limits compile() passes to
  /// schedule), or `like`'s layout when it replaces a texture allocated smaller by an earlier plan.
  Slot create_leaf(const Node& n, const std::string& name, Extent alloc, const Slot* like) {
    if (like) {
      const Extent e = alloc.cover({like->alloc_width(), like->alloc_height()});
      return dev->create_texture(like->layout(), name, e.width, e.height);
    }
    const TextureLayout layout =
        so->row_aligned_layout ? TextureLayout::for_shape(std::vector<int64_t>(n.shape.begin(), n.shape.end()),
                                                          so->max_texture_width, so->max_texture_height)
                               : dev->layout_for(n.numel());
    const Extent e = alloc.cover({layout.width, layout.height});
    return dev->create_texture(layout, name, e.width, e.height);
  }
  bool covers(const Slot& s, Extent alloc) { return s.alloc_width() >= alloc.width && s.alloc_height() >= alloc.height; }
  void upload(Slot& s, const float* data, int64_t numel) { dev->upload(s, data, numel); }
  void download(const Slot& s, float* data, int64_t numel) { dev->download(s, data, numel); }
};
using Persistent = detail::PersistentValues<TextureStorage>;

class GlesContext;

class GlesExecutable final : public Executable {
 public:
  GlesExecutable(std::shared_ptr<GlesContext> be, Plan plan);
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) override;
  int kernels_per_step() const override { return static_cast<int>(plan_.kernels.size()); }
  const Plan* plan() const override { return &plan_; }
  std::vector<KernelTiming> last_timings() const override { return timings_; }
  std::vector<std::pair<std::string, double>> last_phases() const override { return phases_; }

 private:
  std::shared_ptr<GlesContext> be_;  ///< first: destroyed last, after every device object below
  Plan plan_;
  FeedChecker feeds_{plan_.program};
  detail::PlanSlots<TextureStorage> slots_;  // the texture of every value (plan_executor.h)
  std::vector<const gles::Program*> programs_;
  struct Binding {
    std::string sampler;
    int value;
    int plane;  // plane (Value::planes: row and column planes), 0 otherwise
  };
  std::vector<std::vector<Binding>> bindings_;  // per kernel: sampler -> value's texture
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
};

/// The device, programs and persistent values of the backend, shared by the backend and every executable it
/// compiled: an executable runs after the backend that made it is gone (sg::Backend's contract).
class GlesContext final : public std::enable_shared_from_this<GlesContext> {
 public:
  explicit GlesContext(const BackendOptions& opt) : opt_(opt) {
    gles::DeviceOptions d;
    d.max_texture_width = opt.max_texture_width.value_or(0);
    dev_ = gles::Device::create(d);
    dev_->set_profiling(opt.profile);
    target_ = make_target(TargetName::GlslEsFragment, device_caps());
    const TargetPolicy policy = target_policy(target_, opt);  // the one policy (sg/backend.h); ValueError for bad options
    so_ = policy.schedule;
    emitter_ = make_emitter(target_, policy.emit);
    // GPU-only: CPU rasterisers run a few threads over the commands and gain nothing from early flushes
    flush_draws_ = opt.flush_draws.value_or(!target_.cpu_device);
    storage_ = {dev_.get(), &so_};
    dump_dir_ = opt.dump_dir;
    if (dump_dir_.empty())
      if (const char* e = std::getenv("SG_DUMP")) dump_dir_ = e;
  }
  /// The device's capabilities as the target description reads them.
  DeviceCaps device_caps() const {
    const gles::Caps& c = dev_->caps();
    DeviceCaps dc;
    dc.renderer = c.renderer;
    dc.cpu_device = is_cpu_renderer(c.renderer);
    dc.max_texture_size = c.max_texture_size;
    dc.max_texture_width = dev_->max_texture_width();
    dc.max_draw_buffers = static_cast<int>(std::min<int64_t>(c.max_draw_buffers, 1 << 20));
    dc.max_texture_units = static_cast<int>(std::min<int64_t>(c.max_texture_units, 1 << 20));
    return dc;
  }
  std::string name() const { return "gles"; }
  std::string device() const { return dev_->caps().renderer; }
  std::unique_ptr<Executable> compile(const Program& p) {
    Plan plan = schedule(p, so_);
    if (!dump_dir_.empty()) dump_plan(plan, fmt::format("{}/program{:02}", dump_dir_, dumps_++), cache_);
    return std::make_unique<GlesExecutable>(shared_from_this(), std::move(plan));
  }
  std::vector<float> read(const Tensor& leaf) { return persistent_.read(storage_, leaf); }
  void write(const Tensor& leaf, const std::vector<float>& data) { persistent_.write(storage_, leaf, data); }
  TextureStorage& storage() { return storage_; }
  /// The front/back textures of the Param/State leaves (plan_executor.h), allocated to cover every plan's
  /// Value::extent (a union-domain draw writes their next value).
  Persistent& persistent() { return persistent_; }

  /// A linked program and the names of its samplers in binding order (the kernel's inputs, one per plane).
  struct KernelProgram {
    const gles::Program* program = nullptr;
    std::vector<std::string> samplers;
  };
  /// The samplers kernel k declares, in binding order (emit_fragment: `in_<value>`, `in_<value>_p<plane>`).
  static std::vector<std::string> sampler_names(const Plan& plan, const Kernel& k) {
    std::vector<std::string> names;
    for (int in : k.inputs) {
      const Value& v = plan.values[in];
      if (v.planes == 1) names.push_back("in_" + v.name);
      for (int p = 0; v.planes > 1 && p < v.planes; ++p) names.push_back(fmt::format("in_{}_p{}", v.name, p));
    }
    return names;
  }
  /// The program of kernel k: compiled once per kernel_code_key (kernels equal up to the names of their values
  /// share the program of the first one, whose sampler names the caller binds by position).
  const KernelProgram& program_for(Plan& plan, const Kernel& k) {
    const std::string key = emitter_->code_key(plan, k);
    if (auto hit = by_code_.find(key); hit != by_code_.end()) return hit->second;
    std::string src = emitter_->source(plan, k);
    try {
      const CompiledShader& c = cache_.get_or_compile(k.name, src, ShaderStage::Fragment);
      auto it = programs_.find(c.gles);
      if (it == programs_.end())  // samplers and outputs as SPIRV-Cross reflected them (CompiledShader::declared)
        it = programs_.emplace(c.gles, dev_->create_program(c.gles, k.name, c.declared)).first;
      return by_code_.emplace(key, KernelProgram{&it->second, sampler_names(plan, k)}).first->second;
    } catch (const CompileError& e) {
      // name the graph nodes (and the user's lines) the failing kernel computes
      throw CompileError(fmt::format("{}\ngraph nodes in kernel {}:\n{}", e.what(), k.name, k.comment));
    }
  }

  gles::Device& dev() { return *dev_; }
  bool profile() const { return opt_.profile; }
  bool flush_draws() const { return flush_draws_; }

 private:
  BackendOptions opt_;
  std::unique_ptr<gles::Device> dev_;
  KernelCache cache_;
  std::unordered_map<std::string, gles::Program> programs_;
  std::unordered_map<std::string, KernelProgram> by_code_;  // kernel_code_key -> program (in programs_)
  TextureStorage storage_;
  Persistent persistent_{"gles"};  // after dev_: its textures go before the device
  std::string dump_dir_;
  int dumps_ = 0;
  Target target_;
  ScheduleOptions so_;
  std::unique_ptr<const Emitter> emitter_;  ///< the glsl-es-fragment emitter (make_emitter)
  bool flush_draws_ = false;
};

GlesExecutable::GlesExecutable(std::shared_ptr<GlesContext> be, Plan plan)
    : be_(std::move(be)), plan_(std::move(plan)), slots_(be_->storage(), be_->persistent(), plan_) {
  for (auto& k : plan_.kernels) {
    const GlesContext::KernelProgram& kp = be_->program_for(plan_, k);
    programs_.push_back(kp.program);
    std::vector<Binding> b;  // by position: the program may be another kernel's of the same code (other names)
    for (int in : k.inputs) {
      const Value& v = plan_.values[in];
      for (int p = 0; p < v.planes; ++p) b.push_back({kp.samplers.at(b.size()), in, p});
    }
    bindings_.push_back(std::move(b));
  }
}

std::vector<std::vector<float>> GlesExecutable::run(const std::vector<Feed>& feeds) {
  gles::Device& dev = be_->dev();
  std::vector<std::pair<std::string, const gles::Texture*>> ins;
  std::vector<gles::Texture*> outs;
  auto upload = [&] {
    slots_.upload_feeds(feeds_, feeds);  // ValueError before any upload
    if (be_->flush_draws()) dev.flush();
  };
  auto draw = [&](size_t k) {
    const Kernel& kern = plan_.kernels[k];
    ins.clear();
    for (auto& b : bindings_[k]) ins.emplace_back(b.sampler, &slots_.of(b.value, b.plane));
    if (kern.exprs.size() == 1) {
      dev.draw(*programs_[k], ins, slots_.of(kern.output()), kern.name);
    } else {
      outs.clear();
      for (int o : kern.outputs)
        for (int p = 0; p < plan_.values[o].planes; ++p) outs.push_back(&slots_.of(o, p));
      if (kern.blocks() > 1)  // union-domain kernel: outputs of different layouts, one draw over its extent
        dev.draw(*programs_[k], ins, outs, kern.name, kern.extent.width, kern.extent.height);
      else
        dev.draw(*programs_[k], ins, outs, kern.name);
    }
    if (be_->flush_draws()) dev.flush();
    if (be_->profile()) timings_.push_back({kern.name, dev.last_draw_ms(), dev.timer_queries_available()});
  };
  return slots_.run(phases_, upload, [&] {
    timings_.clear();
    slots_.launch_each(draw, [this](int k, const auto& read) { notify_hook(k, plan_.kernels[k], plan_, read); });
  });
}

using GlesBackend = SharedContextBackend<GlesContext>;

}  // namespace

std::unique_ptr<Backend> make_gles_backend(const BackendOptions& opt) { return std::make_unique<GlesBackend>(opt); }

gles::LiveObjects gles_live_objects(Backend& backend) {
  auto* g = dynamic_cast<GlesBackend*>(&backend);
  if (!g) {
    if (auto c = detail::gles_compute_live_objects(backend)) return *c;
    throw ValueError("gles_live_objects: backend '" + backend.name() + "' is not a GLES backend");
  }
  return g->context().dev().live_objects();
}

}  // namespace sg
