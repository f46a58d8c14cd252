// The GLES backend: executes Plans as fragment-shader passes over RGBA32F textures (headless EGL).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "gles_backends.h"
#include "sg/backend.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/feeds.h"
#include "sg/gles_device.h"
#include "sg/kernel_cache.h"
#include "shared_context_backend.h"

namespace sg {

namespace {

/// A persistent value's two textures; `front` holds the current value.
struct Persistent {
  gles::Texture front, back;
};

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
  std::unordered_map<const Node*, size_t> feed_slot_;  // Input node -> position in feeds_.inputs()
  std::vector<const gles::Program*> programs_;
  std::vector<gles::Texture> buffers_;                 // pooled temps
  std::unordered_map<int, gles::Texture> own_;         // inputs and constants, by value id
  struct Binding {
    std::string sampler;
    int value;
    int plane;  // plane (Value::planes: row and column planes), 0 otherwise
  };
  std::vector<std::vector<Binding>> bindings_;  // per kernel: sampler -> value's texture
  std::vector<KernelTiming> timings_;
  std::vector<std::pair<std::string, double>> phases_;
  gles::Texture& texture_of(int value_id, bool for_write, int plane = 0);
  std::vector<float> read_value(int value_id);  // row-major, whatever the storage (transposed, row planes)
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
  std::vector<float> read(const Tensor& leaf) {
    Persistent& p = persistent(leaf.node());
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

  /// The front/back textures of a Param/State leaf, created (with its initial data) on first use. `alloc`: the
  /// allocation a plan needs (Value::extent: a union-domain draw writes its next value); textures allocated
  /// smaller by an earlier plan are replaced by larger ones holding the same current value.
  Persistent& persistent(const NodePtr& n, Extent alloc = {}) {
    auto it = state_.find(n.get());
    if (it != state_.end()) {
      Persistent& p = it->second;
      if (p.front.alloc_width() < alloc.width || p.front.alloc_height() < alloc.height) {
        const Extent e = alloc.cover({p.front.alloc_width(), p.front.alloc_height()});
        std::vector<float> current(static_cast<size_t>(n->numel()));
        dev_->download(p.front, current.data(), n->numel());
        Persistent grown;
        grown.front = dev_->create_texture(p.front.layout(), n->name, e.width, e.height);
        grown.back = dev_->create_texture(p.front.layout(), n->name + ".back", e.width, e.height);
        dev_->upload(grown.front, current.data(), n->numel());
        p = std::move(grown);
      }
      return p;
    }
    if (!n->data) throw ValueError("gles: " + n->describe() + " is not a parameter or state");
    Persistent p;
    // the plan's layout for this shape (TextureLayout::for_shape with the limits compile() passes to schedule)
    const TextureLayout layout =
        so_.row_aligned_layout ? TextureLayout::for_shape(std::vector<int64_t>(n->shape.begin(), n->shape.end()),
                                                          so_.max_texture_width, so_.max_texture_height)
                               : dev_->layout_for(n->numel());
    const Extent e = alloc.cover({layout.width, layout.height});
    p.front = dev_->create_texture(layout, n->name, e.width, e.height);
    p.back = dev_->create_texture(layout, n->name + ".back", e.width, e.height);
    dev_->upload(p.front, n->data->data(), n->numel());
    keep_.push_back(n);
    return state_.emplace(n.get(), std::move(p)).first->second;
  }

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
  std::unordered_map<const Node*, Persistent> state_;
  std::vector<NodePtr> keep_;  // keeps persistent nodes alive while their textures exist
  std::string dump_dir_;
  int dumps_ = 0;
  Target target_;
  ScheduleOptions so_;
  std::unique_ptr<const Emitter> emitter_;  ///< the glsl-es-fragment emitter (make_emitter)
  bool flush_draws_ = false;
};

GlesExecutable::GlesExecutable(std::shared_ptr<GlesContext> be, Plan plan)
    : be_(std::move(be)), plan_(std::move(plan)) {
  for (size_t i = 0; i < feeds_.inputs().size(); ++i) feed_slot_.emplace(feeds_.inputs()[i].get(), i);
  for (size_t b = 0; b < plan_.buffers.size(); ++b)  // allocated for the largest draw writing the buffer
    buffers_.push_back(be_->dev().create_texture(plan_.buffers[b], "pool", plan_.buffer_extents[b].width,
                                                 plan_.buffer_extents[b].height));
  for (auto& v : plan_.values) {
    if (v.kind == ValueKind::Input) own_.emplace(v.id, be_->dev().create_texture(v.layout, v.name));
    if (v.kind == ValueKind::Constant) {
      gles::Texture t = be_->dev().create_texture(v.layout, v.name);
      be_->dev().upload(t, v.node->data->data(), v.node->numel());
      own_.emplace(v.id, std::move(t));
    }
    if (v.kind == ValueKind::Persistent) be_->persistent(v.node, v.extent);
  }
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

gles::Texture& GlesExecutable::texture_of(int id, bool for_write, int plane) {
  const Value& v = plan_.values[id];
  if (plane > 0) return buffers_.at(v.plane_buffers.at(plane));  // row planes exist for temps only
  switch (v.kind) {
    case ValueKind::Input:
    case ValueKind::Constant: return own_.at(id);
    case ValueKind::Persistent: return be_->persistent(v.node).front;
    case ValueKind::Temp:
      if (v.update_of >= 0) return be_->persistent(plan_.values[v.update_of].node).back;
      return buffers_[v.buffer];
  }
  (void)for_write;
  throw BackendError("gles: unknown value kind");
}

std::vector<float> GlesExecutable::read_value(int id) {
  gles::Device& dev = be_->dev();
  const Value& val = plan_.values[id];
  std::vector<float> v(val.node->numel());
  if (val.planes > 1) {  // row planes (Value::planes): interleave the planes' rows back
    const int64_t P = val.row_planes(), Pc = val.col_planes, cols = val.node->shape.back(), per = val.layout.numel;
    const int64_t pcols = cols / Pc;  // a plane's row: texel t of it is texel t * Pc + q of the tensor row
    std::vector<float> plane(per);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Pc; ++q) {
        dev.download(texture_of(id, false, static_cast<int>(p * Pc + q)), plane.data(), per);
        for (int64_t r = 0; r < per / pcols; ++r)
          for (int64_t t = 0; t < pcols / 4; ++t)
            std::copy_n(plane.data() + r * pcols + t * 4, 4, v.data() + (r * P + p) * cols + (t * Pc + q) * 4);
      }
    return v;
  }
  dev.download(texture_of(id, false), v.data(), static_cast<int64_t>(v.size()));
  if (val.transposed) {  // the texture holds the transpose (Value::transposed): back to row-major
    const int64_t rows = val.node->shape[0], cols = val.node->shape[1];
    std::vector<float> t(v.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) t[i * cols + j] = v[j * rows + i];
    v.swap(t);
  }
  return v;
}

std::vector<std::vector<float>> GlesExecutable::run(const std::vector<Feed>& feeds) {
  gles::Device& dev = be_->dev();
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  phases_.clear();
  Clock::time_point t0 = Clock::now();
  const std::vector<const std::vector<float>*> data = feeds_.check(feeds);  // ValueError before any upload
  for (auto& v : plan_.values) {
    if (v.kind != ValueKind::Input) continue;
    dev.upload(own_.at(v.id), data[feed_slot_.at(v.node.get())]->data(), v.node->numel());
  }
  if (be_->flush_draws()) dev.flush();
  phases_.emplace_back("upload", ms_since(t0));
  t0 = Clock::now();
  timings_.clear();
  std::vector<std::pair<std::string, const gles::Texture*>> ins;
  std::vector<gles::Texture*> outs;
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    const Kernel& kern = plan_.kernels[k];
    ins.clear();
    for (auto& b : bindings_[k]) ins.emplace_back(b.sampler, &texture_of(b.value, false, b.plane));
    if (kern.exprs.size() == 1) {
      dev.draw(*programs_[k], ins, texture_of(kern.output(), true), kern.name);
    } else {
      outs.clear();
      for (int o : kern.outputs)
        for (int p = 0; p < plan_.values[o].planes; ++p) outs.push_back(&texture_of(o, true, p));
      if (kern.blocks() > 1)  // union-domain kernel: outputs of different layouts, one draw over its extent
        dev.draw(*programs_[k], ins, outs, kern.name, kern.extent.width, kern.extent.height);
      else
        dev.draw(*programs_[k], ins, outs, kern.name);
    }
    if (be_->flush_draws()) dev.flush();
    if (be_->profile()) timings_.push_back({kern.name, dev.last_draw_ms(), dev.timer_queries_available()});
    notify_hook(static_cast<int>(k), kern, plan_, [this](int v) { return read_value(v); });
  }
  phases_.emplace_back("submit", ms_since(t0));
  t0 = Clock::now();
  std::vector<std::vector<float>> out;
  for (int id : plan_.output_values) out.push_back(read_value(id));
  phases_.emplace_back("readback", ms_since(t0));
  for (auto& [target, value] : plan_.updates) {
    Persistent& p = be_->persistent(plan_.values[target].node);
    std::swap(p.front, p.back);
  }
  return out;
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
