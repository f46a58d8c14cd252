// shadergrad — the GLES device's draws and timing (see sg/gles_device.h).
#include "sg/gles_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <llvm/ADT/SmallVector.h>
#include <nlohmann/json.hpp>

#include "gles_context.h"
#include "sg/error.h"

namespace sg::gles {

// ---------------------------------------------------------------------------------------------------------
// Draw
// ---------------------------------------------------------------------------------------------------------

void Device::draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
                  Texture& output, const std::string& kernel_name) {
  Texture* outputs[1] = {&output};
  draw_impl(program, inputs, outputs, kernel_name, /*check_declared_outputs=*/false, 0, 0);
}

void Device::draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
                  llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name) {
  draw_impl(program, inputs, outputs, kernel_name, /*check_declared_outputs=*/true, 0, 0);
}

void Device::draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
                  llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name, int64_t viewport_width,
                  int64_t viewport_height) {
  if (viewport_width < 1 || viewport_height < 1)
    throw ValueError(fmt::format("gles::Device::draw({}): the viewport must be at least 1x1 texels, got {}x{}",
                                 kernel_where(kernel_name), viewport_width, viewport_height));
  draw_impl(program, inputs, outputs, kernel_name, /*check_declared_outputs=*/true, viewport_width, viewport_height);
}

namespace {
/// "the output texture" for a single-output draw, "output j ('name')" for several.
std::string output_label(llvm::ArrayRef<Texture*> outputs, size_t j) {
  if (outputs.size() <= 1) return std::string("the output texture");
  const Texture* t = outputs[j];
  return t && !t->name().empty() ? fmt::format("output {} ('{}')", j, t->name()) : fmt::format("output {}", j);
}
}  // namespace

void Device::validate_draw_outputs(const Program& program, llvm::ArrayRef<Texture*> outputs,
                                   const std::string& where, bool check_declared_outputs, int64_t viewport_width,
                                   int64_t viewport_height) const {
  if (static_cast<int64_t>(outputs.size()) > caps_.max_draw_buffers)
    throw ValueError(fmt::format("gles::Device::draw({}): {} output textures exceed the {} draw buffers of "
                                 "'{}' (caps().max_draw_buffers); split the kernel",
                                 where, outputs.size(), caps_.max_draw_buffers, caps_.renderer));
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Texture* t = outputs[j];
    if (!t || !t->valid() || t->gl_.context() != ctx_)
      throw ValueError(fmt::format("gles::Device::draw({}): {} is null, empty or belongs to another device",
                                   where, output_label(outputs, j)));
    if (viewport_width > 0 && (t->alloc_width() < viewport_width || t->alloc_height() < viewport_height))
      throw ValueError(fmt::format("gles::Device::draw({}): {} is allocated {}x{} texels, smaller than the {}x{} "
                                   "viewport (GLES renders only where every attachment exists); allocate it at "
                                   "least as large as the largest draw that writes it",
                                   where, output_label(outputs, j), t->alloc_width(), t->alloc_height(), viewport_width,
                                   viewport_height));
    if (viewport_width == 0 && (t->width() != outputs[0]->width() || t->height() != outputs[0]->height()))
      throw ValueError(fmt::format("gles::Device::draw({}): output textures differ in size: {} is {}x{} "
                                   "texels but {} is {}x{}; every output of one draw needs the same width "
                                   "and height",
                                   where, output_label(outputs, j), t->width(), t->height(), output_label(outputs, 0),
                                   outputs[0]->width(), outputs[0]->height()));
    for (size_t k = 0; k < j; ++k)
      if (outputs[k]->id() == t->id())
        throw ValueError(fmt::format("gles::Device::draw({}): the same texture ({}) is both {} and {}; "
                                     "each output needs its own texture",
                                     where, texture_where(t->name()), output_label(outputs, k), output_label(outputs, j)));
  }
  if (check_declared_outputs && program.fragment_outputs() > 0 &&
      static_cast<size_t>(program.fragment_outputs()) != outputs.size())
    throw ValueError(fmt::format("gles::Device::draw({}): {} output textures for a fragment shader that "
                                 "declares {} outputs (locations 0..{}); pass one texture per location",
                                 where, outputs.size(), program.fragment_outputs(),
                                 program.fragment_outputs() - 1));

}

std::vector<Device::SamplerBinding> Device::resolve_sampler_bindings(
    const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
    llvm::ArrayRef<Texture*> outputs, const std::string& where) const {
  std::vector<SamplerBinding> bindings;
  bindings.reserve(inputs.size());
  std::vector<bool> sampler_bound(program.samplers().size(), false);
  for (const auto& [name, tex] : inputs) {
    if (!tex || !tex->valid() || tex->gl_.context() != ctx_)
      throw ValueError(fmt::format("gles::Device::draw({}): input '{}' is null, empty or belongs to another "
                                   "device",
                                   where, name));
    for (size_t j = 0; j < outputs.size(); ++j)
      if (tex->id() == outputs[j]->id())
        throw ValueError(fmt::format("gles::Device::draw({}): input '{}' is also {} ({}): a "
                                     "framebuffer feedback loop; render into another texture (ping-pong)",
                                     where, name, outputs.size() > 1 ? output_label(outputs, j) : std::string("the output"),
                                     texture_where(outputs[j]->name())));
    const auto& s = program.samplers();
    auto it = std::find_if(s.begin(), s.end(), [&n = name](const auto& p) { return p.first == n; });  // clang 14
    if (it == s.end()) {
      const auto& d = program.declared_samplers();
      if (std::find(d.begin(), d.end(), name) != d.end()) continue;  // declared but optimised out
      std::string known;
      for (const auto& n : d) known += (known.empty() ? "" : ", ") + n;
      throw ValueError(fmt::format("gles::Device::draw({}): the program has no sampler named '{}' "
                                   "(declared samplers: {})",
                                   where, name, known.empty() ? "none" : known));
    }
    sampler_bound[static_cast<size_t>(it - s.begin())] = true;
    bindings.push_back({it->second, tex});
  }
  for (size_t i = 0; i < sampler_bound.size(); ++i)
    if (!sampler_bound[i])
      throw ValueError(fmt::format("gles::Device::draw({}): sampler '{}' has no input texture", where,
                                   program.samplers()[i].first));
  if (static_cast<int64_t>(bindings.size()) > caps_.max_texture_units)
    throw ValueError(fmt::format("gles::Device::draw({}): {} input textures exceed the {} texture units of "
                                 "'{}'; split the kernel",
                                 where, bindings.size(), caps_.max_texture_units, caps_.renderer));

  return bindings;
}

void Device::bind_draw_framebuffer(llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name,
                                   const std::string& where) {
  const Texture& first = *outputs[0];
  if (outputs.size() == 1) {
    // The texture's own framebuffer: complete since creation, draw buffer 0 = COLOR_ATTACHMENT0.
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, first.framebuffer().id());
  } else {
    const size_t n = outputs.size();
    llvm::SmallVector<GLuint, 8> ids(n);
    for (size_t j = 0; j < n; ++j) ids[j] = outputs[j]->id();
    auto it = std::find_if(ctx_->mrt_fbos.begin(), ctx_->mrt_fbos.end(), [&](const detail::Context::MrtFbo& f) {
      return std::equal(f.textures.begin(), f.textures.end(), ids.begin(), ids.end());
    });
    if (it != ctx_->mrt_fbos.end()) {
      glBindFramebuffer(GL_DRAW_FRAMEBUFFER, it->id);  // complete since its first draw
    } else {
      if (ctx_->mrt_fbos.size() >= detail::Context::kMaxMrtFbos) ctx_->clear_mrt_fbos();
      detail::Context::MrtFbo f;
      glGenFramebuffers(1, &f.id);
      if (f.id == 0) {
        check_gl("glGenFramebuffers (MRT framebuffer)", kernel_name);
        throw BackendError(fmt::format("GLES: glGenFramebuffers returned 0 (MRT framebuffer, {})", where));
      }
      ++ctx_->live.framebuffers;
      f.textures.assign(ids.begin(), ids.end());
      ctx_->mrt_fbos.push_back(f);  // registered first, so a failure below still deletes it with its textures
      glBindFramebuffer(GL_DRAW_FRAMEBUFFER, f.id);
      llvm::SmallVector<GLenum, 8> bufs(n, GL_NONE);
      for (size_t j = 0; j < n; ++j) {
        glFramebufferTexture2D(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j), GL_TEXTURE_2D,
                               ids[j], 0);
        bufs[j] = GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j);
      }
      check_gl("glFramebufferTexture2D (MRT outputs)", kernel_name);
      glDrawBuffers(static_cast<GLsizei>(n), bufs.data());
      check_gl("glDrawBuffers", kernel_name);
      const GLenum status = glCheckFramebufferStatus(GL_DRAW_FRAMEBUFFER);
      if (status != GL_FRAMEBUFFER_COMPLETE) {
        std::string errs = drain_gl_errors();
        ctx_->delete_mrt_fbo(ctx_->mrt_fbos.back());
        ctx_->mrt_fbos.pop_back();
        throw BackendError(fmt::format(
            "GLES: the multiple-render-target framebuffer of {} ({} RGBA32F outputs, {}x{}) is incomplete: "
            "{}{} on '{}'",
            where, n, first.width(), first.height(), fbo_status_name(status),
            errs.empty() ? "" : " [" + errs + "]", caps_.renderer));
      }
    }
  }
}

void Device::draw_impl(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
                       llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name,
                       bool check_declared_outputs, int64_t viewport_width, int64_t viewport_height) {
  const std::string where = kernel_where(kernel_name);
  if (!program.valid() || program.gl_.context() != ctx_)
    throw ValueError(fmt::format("gles::Device::draw({}): the program is empty or belongs to another device",
                                 where));
  if (outputs.empty())
    throw ValueError(fmt::format("gles::Device::draw({}): no output textures (pass at least one)", where));
  validate_draw_outputs(program, outputs, where, check_declared_outputs, viewport_width, viewport_height);
  // Sampler names resolved to locations before touching GL state.
  const std::vector<SamplerBinding> bindings = resolve_sampler_bindings(program, inputs, outputs, where);

  ctx_->make_current();
  glUseProgram(program.id());
  check_gl("glUseProgram", kernel_name);
  for (size_t unit = 0; unit < bindings.size(); ++unit) {
    glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(unit));
    glBindTexture(GL_TEXTURE_2D, bindings[unit].tex->id());
    glUniform1i(bindings[unit].location, static_cast<GLint>(unit));
  }
  glActiveTexture(GL_TEXTURE0);
  check_gl("binding input textures", kernel_name);
  bind_draw_framebuffer(outputs, kernel_name, where);
  const Texture& first = *outputs[0];
  glViewport(0, 0, static_cast<GLsizei>(viewport_width > 0 ? viewport_width : first.width()),
             static_cast<GLsizei>(viewport_width > 0 ? viewport_height : first.height()));
  glBindVertexArray(ctx_->vao);
  check_gl("binding the output framebuffer", kernel_name);

  const bool timed = profiling_ && !timer_open_;
  if (timed) begin_timer();
  glDrawArrays(GL_TRIANGLES, 0, 3);
  if (timed) {
    last_draw_ = end_timer();
  }
  check_gl("glDrawArrays", kernel_name);
}

void Device::finish() {
  ctx_->make_current();
  glFinish();
  gl_check("glFinish", "finish");
}

void Device::flush() {
  ctx_->make_current();
  glFlush();
  gl_check("glFlush", "flush");
}

// ---------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------

void Device::begin_timer() {
  if (timer_open_) throw ValueError("gles::Device::begin_timer: a timer is already running (end_timer first)");
  ctx_->make_current();
  if (timer_queries_available()) {
    GLint disjoint = 0;
    glGetIntegerv(GL_GPU_DISJOINT_EXT, &disjoint);  // reading clears the flag
    ctx_->gen_queries(1, &open_query_);
    ctx_->begin_query(GL_TIME_ELAPSED_EXT, open_query_);
    gl_check("glBeginQueryEXT(GL_TIME_ELAPSED_EXT)", "timer");
    timer_open_gpu_ = true;
  } else {
    glFinish();
    timer_start_ns_ = now_ns();
    timer_open_gpu_ = false;
  }
  timer_open_ = true;
}

TimerResult Device::end_timer() {
  if (!timer_open_) throw ValueError("gles::Device::end_timer: no timer is running (begin_timer first)");
  ctx_->make_current();
  timer_open_ = false;
  TimerResult r;
  r.ctx_ = ctx_;
  if (timer_open_gpu_) {
    ctx_->end_query(GL_TIME_ELAPSED_EXT);
    r.query_ = std::exchange(open_query_, 0u);
    r.gpu_ = true;
    gl_check("glEndQueryEXT(GL_TIME_ELAPSED_EXT)", "timer");
  } else {
    glFinish();
    r.ns_ = now_ns() - timer_start_ns_;
    r.gpu_ = false;
  }
  return r;
}

void Device::set_profiling(bool enabled) {
  profiling_ = enabled;
  if (!enabled) last_draw_ = TimerResult();
}

double Device::last_draw_ms() { return last_draw_.ms(); }

// TimerResult: a GL_TIME_ELAPSED_EXT query or a CPU measurement
TimerResult::TimerResult(TimerResult&& o) noexcept
    : ctx_(std::move(o.ctx_)), query_(std::exchange(o.query_, 0u)), gpu_(o.gpu_), ns_(o.ns_) {}

TimerResult& TimerResult::operator=(TimerResult&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    query_ = std::exchange(o.query_, 0u);
    gpu_ = o.gpu_;
    ns_ = o.ns_;
  }
  return *this;
}

TimerResult::~TimerResult() { reset(); }

void TimerResult::reset() {
  if (query_ && ctx_ && ctx_->delete_queries && ctx_->try_make_current()) ctx_->delete_queries(1, &query_);
  query_ = 0;
  ctx_.reset();
  ns_ = -1;
}

int64_t TimerResult::ns() {
  if (query_ && ctx_) {
    ctx_->make_current();
    GLuint64 v = 0;
    ctx_->get_query_ui64(query_, GL_QUERY_RESULT_EXT, &v);  // blocks until available
    GLint disjoint = 0;
    glGetIntegerv(GL_GPU_DISJOINT_EXT, &disjoint);
    gl_check("reading a GL_TIME_ELAPSED_EXT query", "timer");
    ns_ = disjoint ? -1 : static_cast<int64_t>(v);
    ctx_->delete_queries(1, &query_);
    query_ = 0;
  }
  return ns_;
}

double TimerResult::ms() {
  int64_t v = ns();
  return v < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(v) * 1e-6;
}

}  // namespace sg::gles
