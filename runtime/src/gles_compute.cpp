// shadergrad — the GLES device's compute path (GLES 3.1; see sg/gles_device.h).
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
#include "sg/shader_compiler.h"  // mark_source_lines: the one shader-log line marker

namespace sg::gles {

// ---------------------------------------------------------------------------------------------------------
// Compute (GLES 3.1): shader storage buffers, compute programs, dispatches
// ---------------------------------------------------------------------------------------------------------

void Device::probe_compute_caps() {
  caps_.compute = caps_.context_major > 3 || (caps_.context_major == 3 && caps_.context_minor >= 1);
  if (!caps_.compute) return;
  auto geti = [](GLenum e) {
    GLint v = 0;
    glGetIntegerv(e, &v);
    return static_cast<int64_t>(v);
  };
  caps_.max_compute_storage_blocks = geti(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS);
  caps_.max_compute_invocations = geti(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS);
  caps_.max_compute_shared_bytes = geti(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE);
  for (GLuint d = 0; d < 3; ++d) {
    GLint v = 0;
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, d, &v);
    caps_.max_compute_workgroup_count[d] = v;
    v = 0;
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, d, &v);
    caps_.max_compute_workgroup_size[d] = v;
  }
  GLint64 block = 0;
  glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &block);
  caps_.max_storage_block_bytes = block;
  gl_check("querying compute limits (GL_MAX_COMPUTE_*)", "capability probe");
}

void Device::require_compute(std::string_view what) const {
  if (!caps_.compute)
    throw BackendError(fmt::format("GLES: {} needs an OpenGL ES 3.1 context (compute shaders, shader storage buffers); "
                                   "'{}' gave ES {}.{}",
                                   what, caps_.renderer, caps_.context_major, caps_.context_minor));
}



Buffer Device::create_buffer(int64_t numel, std::string_view name) {
  require_compute("create_buffer");
  const std::string where = name.empty() ? std::string("unnamed buffer") : fmt::format("buffer '{}'", name);
  const int64_t bytes = std::max<int64_t>((numel + 3) / 4, 1) * 16;
  if (numel < 0 || bytes > caps_.max_storage_block_bytes)
    throw ValueError(fmt::format("gles::Device::create_buffer({}): {} floats ({} bytes) do not fit "
                                 "GL_MAX_SHADER_STORAGE_BLOCK_SIZE = {} bytes",
                                 where, numel, bytes, caps_.max_storage_block_bytes));
  ctx_->make_current();
  Buffer b;
  b.numel_ = numel;
  b.bytes_ = bytes;
  b.name_ = std::string(name);
  b.gl_ = detail::create_gl_name<detail::GlKind::Buffer>(ctx_, where);
  staging_.assign(static_cast<size_t>(bytes / 4), 0.0f);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, b.id());
  glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(bytes), staging_.data(), GL_DYNAMIC_DRAW);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  gl_check(fmt::format("glBufferData(GL_SHADER_STORAGE_BUFFER, {} bytes)", bytes), where);
  return b;
}

void Device::upload(Buffer& buffer, const float* data, int64_t numel) {
  if (!buffer.valid() || buffer.gl_.context() != ctx_)
    throw ValueError("gles::Device::upload: the buffer is empty or belongs to another device");
  if (numel < 0 || numel > buffer.numel() || (numel > 0 && !data))
    throw ValueError(fmt::format("gles::Device::upload(buffer '{}'): {} elements (data {}) do not fit a buffer sized "
                                 "for {}",
                                 buffer.name(), numel, data ? "set" : "null", buffer.numel()));
  ctx_->make_current();
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer.id());
  if (numel > 0) glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, static_cast<GLsizeiptr>(numel * 4), data);
  const int64_t rest = buffer.bytes() - numel * 4;
  if (rest > 0) {
    staging_.assign(static_cast<size_t>(rest / 4), 0.0f);
    glBufferSubData(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(numel * 4), static_cast<GLsizeiptr>(rest),
                    staging_.data());
  }
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  gl_check("glBufferSubData (upload)", fmt::format("buffer '{}'", buffer.name()));
}

void Device::download(const Buffer& buffer, float* out, int64_t numel) {
  if (!buffer.valid() || buffer.gl_.context() != ctx_)
    throw ValueError("gles::Device::download: the buffer is empty or belongs to another device");
  if (numel < 0 || numel > buffer.numel() || (numel > 0 && !out))
    throw ValueError(fmt::format("gles::Device::download(buffer '{}'): {} elements requested from a buffer sized for {}",
                                 buffer.name(), numel, buffer.numel()));
  if (numel == 0) return;
  ctx_->make_current();
  const std::string where = fmt::format("buffer '{}'", buffer.name());
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer.id());
  const void* src = glMapBufferRange(GL_SHADER_STORAGE_BUFFER, 0, static_cast<GLsizeiptr>(numel * 4), GL_MAP_READ_BIT);
  if (!src) {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    gl_check("glMapBufferRange(GL_MAP_READ_BIT) (download)", where);
    throw BackendError(fmt::format("GLES: glMapBufferRange returned null ({})", where));
  }
  std::memcpy(out, src, static_cast<size_t>(numel) * sizeof(float));
  const GLboolean intact = glUnmapBuffer(GL_SHADER_STORAGE_BUFFER);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  gl_check("glUnmapBuffer (download)", where);
  if (intact != GL_TRUE)
    throw BackendError(fmt::format("GLES: the store of {} was lost while mapped (glUnmapBuffer returned GL_FALSE)", where));
}

ComputeProgram Device::create_compute_program(const std::string& es310_source, const std::string& kernel_name) {
  require_compute("create_compute_program");
  ctx_->make_current();
  const std::string where = kernel_where(kernel_name);
  auto info_log = [](GLuint obj, bool program) {
    GLint len = 0;
    program ? glGetProgramiv(obj, GL_INFO_LOG_LENGTH, &len) : glGetShaderiv(obj, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    program ? glGetProgramInfoLog(obj, static_cast<GLsizei>(log.size()), nullptr, log.data())
            : glGetShaderInfoLog(obj, static_cast<GLsizei>(log.size()), nullptr, log.data());
    log.resize(std::strlen(log.c_str()));
    return log;
  };
  GLuint cs = glCreateShader(GL_COMPUTE_SHADER);
  if (cs == 0) {
    gl_check("glCreateShader(GL_COMPUTE_SHADER)", where);
    throw BackendError(fmt::format("GLES: glCreateShader(GL_COMPUTE_SHADER) returned 0 ({})", where));
  }
  const char* src = es310_source.c_str();
  glShaderSource(cs, 1, &src, nullptr);
  glCompileShader(cs);
  GLint ok = 0;
  glGetShaderiv(cs, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    std::string log = info_log(cs, false);
    glDeleteShader(cs);
    drain_gl_errors();
    throw CompileError(fmt::format("GLES: compute shader of kernel '{}' failed to compile on '{}':\n{}\n--- source (>> "
                                   "marks lines the log blames) ---\n{}",
                                   kernel_name, caps_.renderer, log, mark_source_lines(es310_source, log, kAllSourceLines)));
  }
  ComputeProgram p;
  p.name_ = kernel_name;
  try {
    p.gl_ = detail::create_gl_name<detail::GlKind::Program>(ctx_, where);
  } catch (const BackendError&) {
    glDeleteShader(cs);
    throw;
  }
  glAttachShader(p.id(), cs);
  glLinkProgram(p.id());
  glDetachShader(p.id(), cs);
  glDeleteShader(cs);
  glGetProgramiv(p.id(), GL_LINK_STATUS, &ok);
  if (!ok) {
    std::string log = info_log(p.id(), true);
    drain_gl_errors();
    throw CompileError(fmt::format("GLES: compute program of kernel '{}' failed to link on '{}':\n{}\n--- source ---\n{}",
                                   kernel_name, caps_.renderer, log, mark_source_lines(es310_source, log, kAllSourceLines)));
  }
  GLint ls[3] = {0, 0, 0};
  glGetProgramiv(p.id(), GL_COMPUTE_WORK_GROUP_SIZE, ls);
  p.local_size_ = {ls[0], ls[1], ls[2]};
  gl_check("glLinkProgram (compute)", where);
  return p;
}

void Device::dispatch(const ComputeProgram& program, llvm::ArrayRef<const Buffer*> bindings,
                      const std::array<uint32_t, 3>& groups, const std::string& kernel_name) {
  require_compute("dispatch");
  if (!program.valid() || program.gl_.context() != ctx_)
    throw ValueError(fmt::format("gles::Device::dispatch({}): the program is empty or belongs to another device",
                                 kernel_where(kernel_name)));
  if (static_cast<int64_t>(bindings.size()) > caps_.max_compute_storage_blocks)
    throw ValueError(fmt::format("gles::Device::dispatch({}): {} storage buffers, more than "
                                 "GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS = {}",
                                 kernel_where(kernel_name), bindings.size(), caps_.max_compute_storage_blocks));
  for (int d = 0; d < 3; ++d)
    if (groups[d] == 0 || groups[d] > caps_.max_compute_workgroup_count[d])
      throw ValueError(fmt::format("gles::Device::dispatch({}): {} workgroups in dimension {} (1 ..  "
                                   "GL_MAX_COMPUTE_WORK_GROUP_COUNT[{}] = {})",
                                   kernel_where(kernel_name), groups[d], d, d, caps_.max_compute_workgroup_count[d]));
  for (size_t b = 0; b < bindings.size(); ++b)
    if (!bindings[b] || !bindings[b]->valid() || bindings[b]->gl_.context() != ctx_)
      throw ValueError(fmt::format("gles::Device::dispatch({}): binding {} is null, empty or of another device",
                                   kernel_where(kernel_name), b));
  ctx_->make_current();
  glUseProgram(program.id());
  for (size_t b = 0; b < bindings.size(); ++b)
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(b), bindings[b]->id());
  check_gl("binding shader storage buffers", kernel_name);
  const bool timed = profiling_ && !timer_open_;
  if (timed) begin_timer();
  glDispatchCompute(groups[0], groups[1], groups[2]);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
  if (timed) last_draw_ = end_timer();
  check_gl("glDispatchCompute", kernel_name);
}

}  // namespace sg::gles
