// shadergrad — what the parts of the GLES device share (private to runtime/src/gles_*.cpp): the EGL context every
// handle holds (detail::Context: EGL objects, live-object counters, the framebuffers of multiple-render-target
// draws, the timer-query entry points) and the helpers that name GL/EGL errors, kernels and textures in messages.
// The device (sg/gles_device.h) is split by concern: gles_context.cpp (EGL, creation, capabilities),
// gles_resources.cpp (handles, textures, framebuffers, programs, transfers), gles_draw.cpp (draws and timing),
// gles_compute.cpp (GLES 3.1 buffers, compute programs, dispatches).
#pragma once

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl31.h>
#include <GLES2/gl2ext.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sg/error.h"
#include "sg/gles_device.h"

namespace sg::gles {

// ---------------------------------------------------------------------------------------------------------
// Names of EGL / GL enums and of kernels and textures, for messages (gles_context.cpp)
// ---------------------------------------------------------------------------------------------------------
std::string egl_error_name(EGLint e);
std::string last_egl_error();  ///< egl_error_name(eglGetError())
std::string gl_error_name(GLenum e);
std::string fbo_status_name(GLenum s);
/// Every pending GL error, named, in one string ("" when none).
std::string drain_gl_errors();
/// Throws BackendError if GL reports an error: "<errors> after <step> (<where>)".
void gl_check(std::string_view step, std::string_view where);
std::string kernel_where(std::string_view kernel);  ///< "kernel 'k03_...'" or "no kernel"
std::string texture_where(std::string_view name);   ///< "texture 't12'" or "unnamed texture"
/// True when the space-separated `list` (an extension string) holds `word`.
bool has_word(const char* list, std::string_view word);
int64_t now_ns();  ///< steady clock, nanoseconds
/// Our own count of the users of an EGL display (EGL does not count: one eglTerminate ends every context on it);
/// the last release terminates it.
void display_acquire(EGLDisplay d);
void display_release(EGLDisplay d);
bool is_sampler_type(GLenum t);  ///< a GLSL sampler type (glGetActiveUniform)

// ---------------------------------------------------------------------------------------------------------
// Context: owns the EGL objects; shared by the Device and all its handles
// ---------------------------------------------------------------------------------------------------------
namespace detail {

struct Context {
  EGLDisplay dpy = EGL_NO_DISPLAY;
  EGLContext ctx = EGL_NO_CONTEXT;
  EGLSurface surf = EGL_NO_SURFACE;  // 1x1 pbuffer only when surfaceless contexts are refused
  bool display_acquired = false;
  GLuint vertex_shader = 0;  // compiled once, attached to every program
  GLuint vao = 0;            // empty vertex array for attribute-less draws
  LiveObjects live;
  // Framebuffers of multiple-render-target draws, one per set of attached textures (in colour-slot order),
  // created complete (attachments, draw buffers, status checked) by the first draw into that set and bound as
  // they are by later ones: re-attaching and re-validating one scratch framebuffer on every draw cost submission
  // time on every step. A framebuffer is deleted with any texture attached to it (an attachment would keep the
  // deleted texture's storage alive, and GL reuses texture ids), so an entry never names a stale texture.
  struct MrtFbo {
    GLuint id = 0;
    std::vector<GLuint> textures;
  };
  std::vector<MrtFbo> mrt_fbos;
  static constexpr size_t kMaxMrtFbos = 256;  // a bound on the cache; exceeding it empties it

  void delete_mrt_fbo(const MrtFbo& f) noexcept {
    glDeleteFramebuffers(1, &f.id);
    --live.framebuffers;
  }
  /// Deletes every MRT framebuffer `tex` is attached to (before deleting the texture; the context is current).
  void detach_from_mrt(GLuint tex) noexcept {
    if (tex == 0) return;
    std::erase_if(mrt_fbos, [&](const MrtFbo& f) {
      if (std::find(f.textures.begin(), f.textures.end(), tex) == f.textures.end()) return false;
      delete_mrt_fbo(f);
      return true;
    });
  }
  /// Deletes all MRT framebuffers (when the Device goes, or the cache is full).
  void clear_mrt_fbos() noexcept {
    if (try_make_current())
      for (auto& f : mrt_fbos) delete_mrt_fbo(f);
    else
      live.framebuffers -= static_cast<int64_t>(mrt_fbos.size());
    mrt_fbos.clear();
  }

  // GL_EXT_disjoint_timer_query entry points (null when unavailable)
  PFNGLGENQUERIESEXTPROC gen_queries = nullptr;
  PFNGLDELETEQUERIESEXTPROC delete_queries = nullptr;
  PFNGLBEGINQUERYEXTPROC begin_query = nullptr;
  PFNGLENDQUERYEXTPROC end_query = nullptr;
  PFNGLGETQUERYOBJECTUI64VEXTPROC get_query_ui64 = nullptr;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Makes this context current on the calling thread if it is not already.
  void make_current() {
    if (eglGetCurrentContext() == ctx && ctx != EGL_NO_CONTEXT) return;
    if (!eglMakeCurrent(dpy, surf, surf, ctx))
      throw BackendError(
          fmt::format("GLES: eglMakeCurrent failed ({}): the device's context cannot be made current on "
                      "this thread (is it current on another thread?)",
                      last_egl_error()));
  }

  /// Best effort, for destructors.
  bool try_make_current() noexcept {
    if (ctx == EGL_NO_CONTEXT) return false;
    if (eglGetCurrentContext() == ctx) return true;
    return eglMakeCurrent(dpy, surf, surf, ctx) == EGL_TRUE;
  }

  ~Context() {
    if (ctx != EGL_NO_CONTEXT && try_make_current()) {
      if (vao) glDeleteVertexArrays(1, &vao);
      if (vertex_shader) glDeleteShader(vertex_shader);
    }
    if (dpy != EGL_NO_DISPLAY) {
      if (eglGetCurrentContext() == ctx && ctx != EGL_NO_CONTEXT)
        eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
      if (ctx != EGL_NO_CONTEXT) eglDestroyContext(dpy, ctx);
      if (surf != EGL_NO_SURFACE) eglDestroySurface(dpy, surf);
      if (display_acquired) display_release(dpy);
    }
  }
};

}  // namespace detail

using ContextPtr = std::shared_ptr<detail::Context>;

}  // namespace sg::gles
