// shadergrad — the GLES device's handles, textures, framebuffers, programs and transfers (see sg/gles_device.h).
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
// Resources
// ---------------------------------------------------------------------------------------------------------

Texture Device::create_texture(int64_t numel, std::string_view name) {
  return create_texture(layout_for(numel), name);
}

Texture Device::create_texture(const TextureLayout& layout, std::string_view name) {
  return create_texture(layout, name, layout.width, layout.height);
}

Texture Device::create_texture(const TextureLayout& layout, std::string_view name, int64_t alloc_width,
                               int64_t alloc_height) {
  if (layout.width < 1 || layout.height < 1 || layout.width > max_width_ || layout.height > caps_.max_texture_size ||
      layout.texels > layout.width * layout.height || layout.numel > 4 * layout.texels || layout.numel < 0)
    throw ValueError(fmt::format("gles::Device::create_texture({}): invalid layout {} (limit {}x{})",
                                 texture_where(name), layout.str(), max_width_, caps_.max_texture_size));
  if (alloc_width < layout.width || alloc_height < layout.height || alloc_width > caps_.max_texture_size ||
      alloc_height > caps_.max_texture_size)
    throw ValueError(fmt::format("gles::Device::create_texture({}): allocation {}x{} must cover the layout {} and "
                                 "stay within MAX_TEXTURE_SIZE {}",
                                 texture_where(name), alloc_width, alloc_height, layout.str(),
                                 caps_.max_texture_size));
  ctx_->make_current();
  const std::string where = texture_where(name);
  Texture t;
  t.layout_ = layout;
  t.alloc_width_ = alloc_width;
  t.alloc_height_ = alloc_height;
  t.name_ = std::string(name);
  t.gl_ = detail::create_gl_name<detail::GlKind::Texture>(ctx_, where);
  glBindTexture(GL_TEXTURE_2D, t.id());
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  gl_check("glTexParameteri", where);
  glTexStorage2D(GL_TEXTURE_2D, 1, GL_RGBA32F, static_cast<GLsizei>(alloc_width), static_cast<GLsizei>(alloc_height));
  gl_check(fmt::format("glTexStorage2D(RGBA32F, {}x{})", alloc_width, alloc_height), where);
  glBindTexture(GL_TEXTURE_2D, 0);

  t.fbo_ = create_framebuffer(t, name.empty() ? std::string_view() : std::string_view(t.name_));
  // Zero-fill, so padding texels and never-written textures read as 0.
  glBindFramebuffer(GL_DRAW_FRAMEBUFFER, t.fbo_.id());
  const GLfloat zero[4] = {0.f, 0.f, 0.f, 0.f};
  glClearBufferfv(GL_COLOR, 0, zero);
  gl_check("glClearBufferfv (zero fill)", where);
  return t;
}

Framebuffer Device::create_framebuffer(const Texture& texture, std::string_view kernel_name) {
  if (!texture.valid() || texture.gl_.context() != ctx_)
    throw ValueError(fmt::format("gles::Device::create_framebuffer ({}): the texture is empty or belongs to "
                                 "another device",
                                 kernel_where(kernel_name)));
  ctx_->make_current();
  const std::string where = fmt::format("{}, {}", kernel_where(kernel_name), texture_where(texture.name()));
  Framebuffer f;
  f.width_ = texture.alloc_width();
  f.height_ = texture.alloc_height();
  f.gl_ = detail::create_gl_name<detail::GlKind::Framebuffer>(ctx_, where);
  glBindFramebuffer(GL_FRAMEBUFFER, f.id());
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture.id(), 0);
  gl_check("glFramebufferTexture2D", where);
  GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  if (status != GL_FRAMEBUFFER_COMPLETE) {
    std::string errs = drain_gl_errors();
    throw BackendError(fmt::format(
        "GLES: framebuffer for {} is incomplete: {}{} (RGBA32F {}x{} on '{}'; float render targets need "
        "EXT_color_buffer_float or ES 3.2)",
        where, fbo_status_name(status), errs.empty() ? "" : " [" + errs + "]", texture.alloc_width(),
        texture.alloc_height(), caps_.renderer));
  }
  return f;
}

Program Device::create_program(const std::string& fragment_source, const std::string& kernel_name,
                               const std::optional<ShaderInterface>& declared) {
  ctx_->make_current();
  const std::string where = kernel_where(kernel_name);
  GLuint fs = glCreateShader(GL_FRAGMENT_SHADER);
  if (fs == 0) {
    gl_check("glCreateShader(GL_FRAGMENT_SHADER)", where);
    throw BackendError(fmt::format("GLES: glCreateShader returned 0 ({})", where));
  }
  const char* src = fragment_source.c_str();
  glShaderSource(fs, 1, &src, nullptr);
  glCompileShader(fs);
  GLint ok = 0;
  glGetShaderiv(fs, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetShaderiv(fs, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetShaderInfoLog(fs, static_cast<GLsizei>(log.size()), nullptr, log.data());
    log.resize(std::strlen(log.c_str()));
    glDeleteShader(fs);
    drain_gl_errors();
    throw CompileError(fmt::format(
        "GLES: fragment shader of kernel '{}' failed to compile on '{}':\n{}\n--- source (>> marks lines the "
        "log blames) ---\n{}",
        kernel_name, caps_.renderer, log, mark_source_lines(fragment_source, log, kAllSourceLines)));
  }

  Program p;
  p.name_ = kernel_name;
  try {
    p.gl_ = detail::create_gl_name<detail::GlKind::Program>(ctx_, where);
  } catch (const BackendError&) {
    glDeleteShader(fs);
    throw;
  }
  glAttachShader(p.id(), ctx_->vertex_shader);
  glAttachShader(p.id(), fs);
  glLinkProgram(p.id());
  glDetachShader(p.id(), ctx_->vertex_shader);
  glDetachShader(p.id(), fs);
  glDeleteShader(fs);
  glGetProgramiv(p.id(), GL_LINK_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetProgramiv(p.id(), GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetProgramInfoLog(p.id(), static_cast<GLsizei>(log.size()), nullptr, log.data());
    log.resize(std::strlen(log.c_str()));
    drain_gl_errors();
    throw CompileError(fmt::format(
        "GLES: program of kernel '{}' failed to link on '{}':\n{}\n--- fragment source ---\n{}", kernel_name,
        caps_.renderer, log, mark_source_lines(fragment_source, log, kAllSourceLines)));
  }
  gl_check("glLinkProgram", where);

  GLint n_uniforms = 0, max_len = 0;
  glGetProgramiv(p.id(), GL_ACTIVE_UNIFORMS, &n_uniforms);
  glGetProgramiv(p.id(), GL_ACTIVE_UNIFORM_MAX_LENGTH, &max_len);
  std::string name_buf(static_cast<size_t>(std::max(max_len, 1)) + 1, '\0');
  for (GLint i = 0; i < n_uniforms; ++i) {
    GLsizei len = 0;
    GLint size = 0;
    GLenum type = 0;
    glGetActiveUniform(p.id(), static_cast<GLuint>(i), static_cast<GLsizei>(name_buf.size()), &len, &size, &type,
                       name_buf.data());
    if (!is_sampler_type(type)) continue;
    std::string uname(name_buf.data(), static_cast<size_t>(len));
    p.samplers_.emplace_back(uname, glGetUniformLocation(p.id(), uname.c_str()));
  }
  if (declared) {
    p.declared_samplers_ = declared->samplers;
    p.fragment_outputs_ = declared->outputs;
  } else {
    for (const auto& sampler : p.samplers_) p.declared_samplers_.push_back(sampler.first);
  }
  gl_check("querying active uniforms", where);
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// Transfers
// ---------------------------------------------------------------------------------------------------------

void Device::upload(Texture& texture, const float* data, int64_t numel) {
  if (!texture.valid() || texture.gl_.context() != ctx_)
    throw ValueError("gles::Device::upload: the texture is empty or belongs to another device");
  if (numel < 0 || numel > texture.numel())
    throw ValueError(fmt::format("gles::Device::upload({}): {} elements do not fit a texture sized for {}",
                                 texture_where(texture.name()), numel, texture.numel()));
  if (numel > 0 && !data)
    throw ValueError(fmt::format("gles::Device::upload({}): data is null", texture_where(texture.name())));
  ctx_->make_current();
  const TextureLayout& l = texture.layout();
  const int64_t row_floats = l.width * TextureLayout::kComponents;
  glBindTexture(GL_TEXTURE_2D, texture.id());
  // Large textures: through a pixel unpack buffer. Orphaning it (glBufferData with no data) gives a fresh store
  // when the previous upload's copy is still pending, and the copy into the texture then runs on the GPU side.
  const int64_t bytes = l.height * row_floats * static_cast<int64_t>(sizeof(float));
  if (bytes >= (int64_t{64} << 10)) {
    if (upload_pbo_ == 0) glGenBuffers(1, &upload_pbo_);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, upload_pbo_);
    glBufferData(GL_PIXEL_UNPACK_BUFFER, static_cast<GLsizeiptr>(bytes), nullptr, GL_STREAM_DRAW);
    void* dst = glMapBufferRange(GL_PIXEL_UNPACK_BUFFER, 0, static_cast<GLsizeiptr>(bytes),
                                 GL_MAP_WRITE_BIT | GL_MAP_INVALIDATE_BUFFER_BIT);
    if (dst) {
      if (numel > 0) std::memcpy(dst, data, static_cast<size_t>(numel) * sizeof(float));
      std::memset(static_cast<char*>(dst) + numel * static_cast<int64_t>(sizeof(float)), 0,
                  static_cast<size_t>(bytes - numel * static_cast<int64_t>(sizeof(float))));
      if (glUnmapBuffer(GL_PIXEL_UNPACK_BUFFER) == GL_TRUE) {
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<GLsizei>(l.width), static_cast<GLsizei>(l.height), GL_RGBA,
                        GL_FLOAT, nullptr);
        glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
        glBindTexture(GL_TEXTURE_2D, 0);
        gl_check("glTexSubImage2D (upload from a pixel unpack buffer)", texture_where(texture.name()));
        return;
      }
      // GL_FALSE: the store was lost while mapped (GLES 3.0 2.10.3); upload from client memory below
    }
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    while (glGetError() != GL_NO_ERROR) {
    }  // the failed map's errors (and an out-of-memory of glBufferData) are not this upload's: the path below is checked
  }
  // Texture rows wholly covered by `data` go straight from it; the rest (a partial last row and padding rows,
  // zero-filled) from the staging buffer. Copying a whole batch into staging first cost a pass over it per step.
  const int64_t full_rows = std::min(numel / row_floats, l.height);
  if (full_rows > 0)
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<GLsizei>(l.width), static_cast<GLsizei>(full_rows), GL_RGBA,
                    GL_FLOAT, data);
  if (full_rows < l.height) {
    const int64_t rest = numel - full_rows * row_floats;
    staging_.assign(static_cast<size_t>((l.height - full_rows) * row_floats), 0.0f);
    if (rest > 0) std::memcpy(staging_.data(), data + full_rows * row_floats, static_cast<size_t>(rest) * sizeof(float));
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, static_cast<GLint>(full_rows), static_cast<GLsizei>(l.width),
                    static_cast<GLsizei>(l.height - full_rows), GL_RGBA, GL_FLOAT, staging_.data());
  }
  glBindTexture(GL_TEXTURE_2D, 0);
  gl_check("glTexSubImage2D (upload)", texture_where(texture.name()));
}

void Device::download(const Texture& texture, float* out, int64_t numel) {
  if (!texture.valid() || texture.gl_.context() != ctx_)
    throw ValueError("gles::Device::download: the texture is empty or belongs to another device");
  if (numel < 0 || numel > texture.numel())
    throw ValueError(fmt::format("gles::Device::download({}): {} elements requested from a texture sized for "
                                 "{}",
                                 texture_where(texture.name()), numel, texture.numel()));
  if (numel == 0) return;
  if (!out)
    throw ValueError(fmt::format("gles::Device::download({}): out is null", texture_where(texture.name())));
  ctx_->make_current();
  const TextureLayout& l = texture.layout();
  const int64_t rows = l.rows_for(numel);
  staging_.resize(static_cast<size_t>(rows * l.width * 4));
  glBindFramebuffer(GL_READ_FRAMEBUFFER, texture.framebuffer().id());
  glReadBuffer(GL_COLOR_ATTACHMENT0);
  glReadPixels(0, 0, static_cast<GLsizei>(l.width), static_cast<GLsizei>(rows), GL_RGBA, GL_FLOAT,
               staging_.data());
  gl_check("glReadPixels(GL_RGBA, GL_FLOAT) (download)", texture_where(texture.name()));
  std::memcpy(out, staging_.data(), static_cast<size_t>(numel) * sizeof(float));
}

}  // namespace sg::gles
