// shadergrad — headless EGL + GLES 3 device (see sg/gles_device.h).
#include "sg/gles_device.h"

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl31.h>
#include <GLES2/gl2ext.h>

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

#include "sg/error.h"
#include "sg/shader_compiler.h"  // mark_source_lines: the one shader-log line marker

namespace sg::gles {

// ---------------------------------------------------------------------------------------------------------
// Names of EGL / GL enums for messages
// ---------------------------------------------------------------------------------------------------------
namespace {

std::string egl_error_name(EGLint e) {
  switch (e) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CURRENT_SURFACE: return "EGL_BAD_CURRENT_SURFACE";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_SURFACE: return "EGL_BAD_SURFACE";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    case EGL_BAD_NATIVE_PIXMAP: return "EGL_BAD_NATIVE_PIXMAP";
    case EGL_BAD_NATIVE_WINDOW: return "EGL_BAD_NATIVE_WINDOW";
    case EGL_CONTEXT_LOST: return "EGL_CONTEXT_LOST";
    default: return fmt::format("EGL error 0x{:04X}", static_cast<unsigned>(e));
  }
}

std::string last_egl_error() { return egl_error_name(eglGetError()); }

std::string gl_error_name(GLenum e) {
  switch (e) {
    case GL_NO_ERROR: return "GL_NO_ERROR";
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    case 0x0507: return "GL_CONTEXT_LOST";
    default: return fmt::format("GL error 0x{:04X}", static_cast<unsigned>(e));
  }
}

std::string fbo_status_name(GLenum s) {
  switch (s) {
    case GL_FRAMEBUFFER_COMPLETE: return "GL_FRAMEBUFFER_COMPLETE";
    case GL_FRAMEBUFFER_UNDEFINED: return "GL_FRAMEBUFFER_UNDEFINED";
    case GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT: return "GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT";
    case GL_FRAMEBUFFER_INCOMPLETE_MISSING_ATTACHMENT: return "GL_FRAMEBUFFER_INCOMPLETE_MISSING_ATTACHMENT";
    case GL_FRAMEBUFFER_INCOMPLETE_DIMENSIONS: return "GL_FRAMEBUFFER_INCOMPLETE_DIMENSIONS";
    case GL_FRAMEBUFFER_UNSUPPORTED: return "GL_FRAMEBUFFER_UNSUPPORTED";
    case GL_FRAMEBUFFER_INCOMPLETE_MULTISAMPLE: return "GL_FRAMEBUFFER_INCOMPLETE_MULTISAMPLE";
    case 0: return "0 (glCheckFramebufferStatus itself failed)";
    default: return fmt::format("framebuffer status 0x{:04X}", static_cast<unsigned>(s));
  }
}

/// Collects every pending GL error ("" when none).
std::string drain_gl_errors() {
  std::string errs;
  for (int i = 0; i < 16; ++i) {  // bounded: a lost context may report errors forever
    GLenum e = glGetError();
    if (e == GL_NO_ERROR) break;
    if (!errs.empty()) errs += ", ";
    errs += gl_error_name(e);
  }
  return errs;
}

/// Throws BackendError if GL reports an error: "<errors> after <step> (<where>)".
void gl_check(std::string_view step, std::string_view where) {
  std::string errs = drain_gl_errors();
  if (!errs.empty())
    throw BackendError(fmt::format("GLES: {} after {} ({})", errs, step, where));
}

std::string kernel_where(std::string_view kernel) {
  return kernel.empty() ? std::string("no kernel") : fmt::format("kernel '{}'", kernel);
}

std::string texture_where(std::string_view name) {
  return name.empty() ? std::string("unnamed texture") : fmt::format("texture '{}'", name);
}

bool has_word(const char* list, std::string_view word) {
  if (!list) return false;
  std::string_view s(list);
  size_t pos = 0;
  while ((pos = s.find(word, pos)) != std::string_view::npos) {
    bool start_ok = pos == 0 || s[pos - 1] == ' ';
    size_t end = pos + word.size();
    bool end_ok = end == s.size() || s[end] == ' ';
    if (start_ok && end_ok) return true;
    pos = end;
  }
  return false;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// EGL displays are not reference counted by EGL (one eglTerminate ends every context on it), and the same
// platform + native display returns the same EGLDisplay. Count our own users so one Device's teardown or a
// failed attempt never terminates a display another Device is using.
std::mutex g_display_mutex;
std::map<EGLDisplay, int> g_display_users;

void display_acquire(EGLDisplay d) {
  std::lock_guard<std::mutex> lock(g_display_mutex);
  ++g_display_users[d];
}

void display_release(EGLDisplay d) {
  std::lock_guard<std::mutex> lock(g_display_mutex);
  auto it = g_display_users.find(d);
  if (it == g_display_users.end()) return;
  if (--it->second == 0) {
    g_display_users.erase(it);
    eglTerminate(d);
  }
}

const char kVertexShader[] = R"(#version 300 es
// shadergrad full-screen triangle: vertices (-1,-1), (3,-1), (-1,3) from gl_VertexID; no attributes.
// The triangle covers the whole viewport, so each output texel gets exactly one fragment.
void main() {
  vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
  gl_Position = vec4(p, 0.0, 1.0);
}
)";

const char kCopyShader[] = R"(#version 300 es
// shadergrad fp32 round-trip probe: copies texels unchanged.
precision highp float;
precision highp sampler2D;
uniform highp sampler2D u_src;
out vec4 o_color;
void main() {
  o_color = texelFetch(u_src, ivec2(gl_FragCoord.xy), 0);
}
)";

bool is_sampler_type(GLenum t) {
  switch (t) {
    case GL_SAMPLER_2D: case GL_SAMPLER_3D: case GL_SAMPLER_CUBE: case GL_SAMPLER_2D_SHADOW:
    case GL_SAMPLER_2D_ARRAY: case GL_SAMPLER_2D_ARRAY_SHADOW: case GL_SAMPLER_CUBE_SHADOW:
    case GL_INT_SAMPLER_2D: case GL_INT_SAMPLER_3D: case GL_INT_SAMPLER_CUBE: case GL_INT_SAMPLER_2D_ARRAY:
    case GL_UNSIGNED_INT_SAMPLER_2D: case GL_UNSIGNED_INT_SAMPLER_3D: case GL_UNSIGNED_INT_SAMPLER_CUBE:
    case GL_UNSIGNED_INT_SAMPLER_2D_ARRAY:
      return true;
    default:
      return false;
  }
}

}  // namespace

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

namespace {

using ContextPtr = std::shared_ptr<detail::Context>;

/// Tries to get an ES 3 context current on an (uninitialised) display. Returns null and sets `why` on
/// failure, after undoing everything it did (the Context destructor releases what was made).
ContextPtr open_context(EGLDisplay dpy, std::string& why, Caps& caps) {
  if (dpy == EGL_NO_DISPLAY) {
    why = fmt::format("no display ({})", last_egl_error());
    return nullptr;
  }
  EGLint major = 0, minor = 0;
  if (!eglInitialize(dpy, &major, &minor)) {
    why = fmt::format("eglInitialize failed ({})", last_egl_error());
    return nullptr;
  }
  auto c = std::make_shared<detail::Context>();
  c->dpy = dpy;
  display_acquire(dpy);
  c->display_acquired = true;

  if (!eglBindAPI(EGL_OPENGL_ES_API)) {
    why = fmt::format("eglBindAPI(EGL_OPENGL_ES_API) failed ({})", last_egl_error());
    return nullptr;
  }
  const EGLint config_attribs[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_ES3_BIT,
                                   EGL_NONE};
  EGLConfig config = nullptr;
  EGLint count = 0;
  if (!eglChooseConfig(dpy, config_attribs, &config, 1, &count)) {
    why = fmt::format("eglChooseConfig failed ({})", last_egl_error());
    return nullptr;
  }
  if (count < 1) {
    why = fmt::format("EGL {}.{}: no config with EGL_PBUFFER_BIT + EGL_OPENGL_ES3_BIT (0 configs)", major,
                      minor);
    return nullptr;
  }

  struct Version { int major, minor; bool with_minor; };
  const Version versions[] = {{3, 2, true}, {3, 1, true}, {3, 0, true}, {3, 0, false}};
  std::string ctx_errors;
  for (const Version& v : versions) {
    std::vector<EGLint> attribs;
    if (v.with_minor) {
      attribs = {EGL_CONTEXT_MAJOR_VERSION, v.major, EGL_CONTEXT_MINOR_VERSION, v.minor, EGL_NONE};
    } else {
      attribs = {EGL_CONTEXT_CLIENT_VERSION, 3, EGL_NONE};  // EGL 1.4 without EGL_KHR_create_context
    }
    c->ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, attribs.data());
    if (c->ctx != EGL_NO_CONTEXT) {
      caps.context_major = v.major;
      caps.context_minor = v.minor;
      break;
    }
    ctx_errors += fmt::format("{}ES {}.{}{}: {}", ctx_errors.empty() ? "" : ", ", v.major, v.minor,
                              v.with_minor ? "" : " (client version)", last_egl_error());
  }
  if (c->ctx == EGL_NO_CONTEXT) {
    why = fmt::format("eglCreateContext failed ({})", ctx_errors);
    return nullptr;
  }

  if (eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, c->ctx)) {
    caps.surfaceless_context = true;
  } else {
    std::string surfaceless_err = last_egl_error();
    const EGLint pb_attribs[] = {EGL_WIDTH, 1, EGL_HEIGHT, 1, EGL_NONE};
    c->surf = eglCreatePbufferSurface(dpy, config, pb_attribs);
    if (c->surf == EGL_NO_SURFACE) {
      why = fmt::format("eglMakeCurrent without surface failed ({}) and eglCreatePbufferSurface failed ({})",
                        surfaceless_err, last_egl_error());
      return nullptr;
    }
    if (!eglMakeCurrent(dpy, c->surf, c->surf, c->ctx)) {
      why = fmt::format("eglMakeCurrent failed without surface ({}) and with a 1x1 pbuffer ({})",
                        surfaceless_err, last_egl_error());
      return nullptr;
    }
    caps.surfaceless_context = false;
  }

  const char* version = reinterpret_cast<const char*>(glGetString(GL_VERSION));
  if (!version || std::strncmp(version, "OpenGL ES 3", 11) != 0) {
    why = fmt::format("context is not OpenGL ES 3 (GL_VERSION '{}')", version ? version : "(null)");
    return nullptr;
  }
  return c;
}

template <class F>
F load_proc(const char* name) {
  return reinterpret_cast<F>(eglGetProcAddress(name));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------------------------------------

Framebuffer::Framebuffer(Framebuffer&& o) noexcept
    : ctx_(std::move(o.ctx_)), id_(std::exchange(o.id_, 0u)), width_(o.width_), height_(o.height_) {}

Framebuffer& Framebuffer::operator=(Framebuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    id_ = std::exchange(o.id_, 0u);
    width_ = o.width_;
    height_ = o.height_;
  }
  return *this;
}

Framebuffer::~Framebuffer() { reset(); }

void Framebuffer::reset() {
  if (id_ && ctx_) {
    if (ctx_->try_make_current()) glDeleteFramebuffers(1, &id_);
    --ctx_->live.framebuffers;
  }
  id_ = 0;
  ctx_.reset();
}

Texture::Texture(Texture&& o) noexcept
    : ctx_(std::move(o.ctx_)), id_(std::exchange(o.id_, 0u)), layout_(o.layout_), alloc_width_(o.alloc_width_),
      alloc_height_(o.alloc_height_), name_(std::move(o.name_)), fbo_(std::move(o.fbo_)) {}

Texture& Texture::operator=(Texture&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    id_ = std::exchange(o.id_, 0u);
    layout_ = o.layout_;
    alloc_width_ = o.alloc_width_;
    alloc_height_ = o.alloc_height_;
    name_ = std::move(o.name_);
    fbo_ = std::move(o.fbo_);
  }
  return *this;
}

Texture::~Texture() { reset(); }

void Texture::reset() {
  fbo_ = Framebuffer();  // the FBO goes before the texture attached to it
  if (id_ && ctx_) {
    if (ctx_->try_make_current()) {
      ctx_->detach_from_mrt(id_);
      glDeleteTextures(1, &id_);
    }
    --ctx_->live.textures;
  }
  id_ = 0;
  ctx_.reset();
}

Program::Program(Program&& o) noexcept
    : ctx_(std::move(o.ctx_)), id_(std::exchange(o.id_, 0u)), name_(std::move(o.name_)),
      samplers_(std::move(o.samplers_)), declared_samplers_(std::move(o.declared_samplers_)),
      fragment_outputs_(o.fragment_outputs_) {}

Program& Program::operator=(Program&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    id_ = std::exchange(o.id_, 0u);
    name_ = std::move(o.name_);
    samplers_ = std::move(o.samplers_);
    declared_samplers_ = std::move(o.declared_samplers_);
    fragment_outputs_ = o.fragment_outputs_;
  }
  return *this;
}

Program::~Program() { reset(); }

void Program::reset() {
  if (id_ && ctx_) {
    if (ctx_->try_make_current()) glDeleteProgram(id_);
    --ctx_->live.programs;
  }
  id_ = 0;
  ctx_.reset();
}

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

// ---------------------------------------------------------------------------------------------------------
// Device creation and caps
// ---------------------------------------------------------------------------------------------------------

const char* Device::vertex_shader_source() { return kVertexShader; }

std::unique_ptr<Device> Device::create(const DeviceOptions& options) {
  if (options.max_texture_width < 0)
    throw ValueError(fmt::format("gles::Device: max_texture_width must be >= 0 (0 = device limit), got {}",
                                 options.max_texture_width));
  const std::string& only = options.platform;
  if (!only.empty() && only != "device" && only != "surfaceless" && only != "default")
    throw ValueError(fmt::format("gles::Device: unknown EGL platform '{}' (use \"\", \"device\", "
                                 "\"surfaceless\" or \"default\")",
                                 only));

  const char* client_ext = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  if (!client_ext) eglGetError();  // EGL_EXT_client_extensions missing: clear EGL_BAD_DISPLAY
  auto get_platform_display =
      load_proc<PFNEGLGETPLATFORMDISPLAYEXTPROC>("eglGetPlatformDisplayEXT");
  const bool has_platform_base = get_platform_display && has_word(client_ext, "EGL_EXT_platform_base");

  std::vector<std::string> failures;
  Caps caps;
  ContextPtr ctx;

  // 1. EGL device platform (NVIDIA headless; Mesa exposes a software device and DRM devices too).
  if (!ctx && (only.empty() || only == "device")) {
    auto query_devices = load_proc<PFNEGLQUERYDEVICESEXTPROC>("eglQueryDevicesEXT");
    auto query_device_string = load_proc<PFNEGLQUERYDEVICESTRINGEXTPROC>("eglQueryDeviceStringEXT");
    if (!has_platform_base || !has_word(client_ext, "EGL_EXT_platform_device") || !query_devices) {
      failures.push_back("device: EGL_EXT_platform_device / EGL_EXT_device_enumeration not supported by "
                         "the EGL client library");
    } else {
      EGLint n = 0;
      if (!query_devices(0, nullptr, &n) || n <= 0) {
        failures.push_back(fmt::format("device: eglQueryDevicesEXT found no devices ({})", last_egl_error()));
      } else {
        std::vector<EGLDeviceEXT> devices(static_cast<size_t>(n));
        query_devices(n, devices.data(), &n);
        devices.resize(static_cast<size_t>(std::max<EGLint>(n, 0)));
        auto dev_ext = [&](EGLDeviceEXT d) -> std::string {
          const char* s = query_device_string ? query_device_string(d, EGL_EXTENSIONS) : nullptr;
          if (!s) eglGetError();
          return s ? s : "";
        };
        // Hardware devices first, Mesa's software rasteriser last.
        std::stable_partition(devices.begin(), devices.end(), [&](EGLDeviceEXT d) {
          return !has_word(dev_ext(d).c_str(), "EGL_MESA_device_software");
        });
        for (size_t i = 0; i < devices.size() && !ctx; ++i) {
          std::string ext = dev_ext(devices[i]);
          std::string why;
          Caps attempt_caps;
          EGLDisplay dpy = get_platform_display(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
          ctx = open_context(dpy, why, attempt_caps);
          if (ctx) {
            caps = attempt_caps;
            caps.egl_platform = "device";
            caps.egl_device = ext;
          } else {
            failures.push_back(fmt::format("device[{}] ({}): {}", i, ext.empty() ? "no extensions" : ext, why));
          }
        }
      }
    }
  }

  // 2. Mesa surfaceless platform.
  if (!ctx && (only.empty() || only == "surfaceless")) {
    if (!has_platform_base || !has_word(client_ext, "EGL_MESA_platform_surfaceless")) {
      failures.push_back("surfaceless: EGL_MESA_platform_surfaceless not supported by the EGL client library");
    } else {
      std::string why;
      Caps attempt_caps;
      EGLDisplay dpy = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
      ctx = open_context(dpy, why, attempt_caps);
      if (ctx) {
        caps = attempt_caps;
        caps.egl_platform = "surfaceless";
      } else {
        failures.push_back("surfaceless: " + why);
      }
    }
  }

  // 3. Default display (works on Mesa only with EGL_PLATFORM=surfaceless, or with a display server).
  if (!ctx && (only.empty() || only == "default")) {
    std::string why;
    Caps attempt_caps;
    ctx = open_context(eglGetDisplay(EGL_DEFAULT_DISPLAY), why, attempt_caps);
    if (ctx) {
      caps = attempt_caps;
      caps.egl_platform = "default";
    } else {
      failures.push_back("default: " + why);
    }
  }

  if (!ctx) {
    std::string msg = "GLES: could not create a headless OpenGL ES 3 context. Attempts:";
    for (const auto& f : failures) msg += "\n  - " + f;
    msg += "\nInstall Mesa's EGL/GLES (Debian: libegl-mesa0 libgl1-mesa-dri libgles2) or a GPU driver with "
           "EGL_EXT_platform_device; on a headless Mesa machine EGL_PLATFORM=surfaceless can help.";
    throw BackendError(msg);
  }

  std::unique_ptr<Device> dev(new Device());
  dev->ctx_ = std::move(ctx);
  dev->caps_ = std::move(caps);
  dev->probe_caps();

  const int64_t limit = dev->caps_.max_texture_size;
  if (options.max_texture_width > limit)
    throw ValueError(fmt::format("gles::Device: max_texture_width {} exceeds the device's "
                                 "GL_MAX_TEXTURE_SIZE {} ({})",
                                 options.max_texture_width, limit, dev->caps_.renderer));
  dev->max_width_ = options.max_texture_width > 0 ? options.max_texture_width : limit;

  if (options.require_fp32) {
    if (!dev->caps_.color_buffer_float)
      throw BackendError(fmt::format(
          "GLES: '{}' ({}) cannot render to RGBA32F textures (EXT_color_buffer_float missing or the "
          "framebuffer is incomplete); shadergrad's fragment backend needs fp32 render targets. Pass "
          "DeviceOptions::require_fp32 = false to open it anyway.",
          dev->caps_.renderer, dev->caps_.version));
    if (!dev->caps_.fp32_roundtrip_ok)
      throw BackendError(fmt::format(
          "GLES: '{}' ({}) does not keep fp32 values exactly through a texture copy: {}. Pass "
          "DeviceOptions::require_fp32 = false to open it anyway.",
          dev->caps_.renderer, dev->caps_.version, dev->caps_.roundtrip_detail));
  }
  return dev;
}

Device::~Device() {
  // The Context (and the GL objects of handles still alive) goes when its last owner does; the scratch
  // framebuffer of MRT draws goes now (deleting it releases its attachments).
  if (ctx_) ctx_->clear_mrt_fbos();
  if (upload_pbo_ && ctx_ && ctx_->try_make_current()) glDeleteBuffers(1, &upload_pbo_);
  last_draw_ = TimerResult();
  if (open_query_ && ctx_ && ctx_->delete_queries && ctx_->try_make_current()) {
    if (timer_open_) ctx_->end_query(GL_TIME_ELAPSED_EXT);
    ctx_->delete_queries(1, &open_query_);
  }
}

void Device::probe_caps() {
  detail::Context& c = *ctx_;
  auto str = [](GLenum e) {
    const GLubyte* s = glGetString(e);
    return s ? std::string(reinterpret_cast<const char*>(s)) : std::string();
  };
  caps_.renderer = str(GL_RENDERER);
  caps_.version = str(GL_VERSION);
  caps_.glsl_version = str(GL_SHADING_LANGUAGE_VERSION);
  caps_.vendor = str(GL_VENDOR);
  GLint v = 0;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &v);
  caps_.max_texture_size = v;
  v = 0;
  glGetIntegerv(GL_MAX_TEXTURE_IMAGE_UNITS, &v);
  caps_.max_texture_units = v;
  GLint draw_buffers = 0, color_attachments = 0;
  glGetIntegerv(GL_MAX_DRAW_BUFFERS, &draw_buffers);
  glGetIntegerv(GL_MAX_COLOR_ATTACHMENTS, &color_attachments);
  caps_.max_draw_buffers = std::min(draw_buffers, color_attachments);
  GLint n_ext = 0;
  glGetIntegerv(GL_NUM_EXTENSIONS, &n_ext);
  caps_.extensions.clear();
  for (GLint i = 0; i < n_ext; ++i) {
    const GLubyte* e = glGetStringi(GL_EXTENSIONS, static_cast<GLuint>(i));
    if (e) caps_.extensions.emplace_back(reinterpret_cast<const char*>(e));
  }
  auto has_ext = [&](std::string_view name) {
    return std::find(caps_.extensions.begin(), caps_.extensions.end(), name) != caps_.extensions.end();
  };
  GLint range[2] = {0, 0};
  GLint precision = 0;
  glGetShaderPrecisionFormat(GL_FRAGMENT_SHADER, GL_HIGH_FLOAT, range, &precision);
  caps_.highp_float_precision = precision;
  gl_check("querying device limits", "capability probe");

  if (has_ext("GL_EXT_disjoint_timer_query")) {
    c.gen_queries = load_proc<PFNGLGENQUERIESEXTPROC>("glGenQueriesEXT");
    c.delete_queries = load_proc<PFNGLDELETEQUERIESEXTPROC>("glDeleteQueriesEXT");
    c.begin_query = load_proc<PFNGLBEGINQUERYEXTPROC>("glBeginQueryEXT");
    c.end_query = load_proc<PFNGLENDQUERYEXTPROC>("glEndQueryEXT");
    c.get_query_ui64 = load_proc<PFNGLGETQUERYOBJECTUI64VEXTPROC>("glGetQueryObjectui64vEXT");
  }
  caps_.timer_query = c.gen_queries && c.delete_queries && c.begin_query && c.end_query && c.get_query_ui64;

  probe_compute_caps();

  // Fixed pipeline state: nothing may alter the fragments a kernel writes.
  for (GLenum cap : {GL_BLEND, GL_DEPTH_TEST, GL_STENCIL_TEST, GL_SCISSOR_TEST, GL_CULL_FACE, GL_DITHER,
                     GL_SAMPLE_ALPHA_TO_COVERAGE, GL_SAMPLE_COVERAGE, GL_POLYGON_OFFSET_FILL,
                     GL_RASTERIZER_DISCARD})
    glDisable(cap);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glGenVertexArrays(1, &c.vao);
  gl_check("setting up pipeline state", "device creation");

  // The shared vertex shader.
  c.vertex_shader = glCreateShader(GL_VERTEX_SHADER);
  const char* vs = kVertexShader;
  glShaderSource(c.vertex_shader, 1, &vs, nullptr);
  glCompileShader(c.vertex_shader);
  GLint ok = 0;
  glGetShaderiv(c.vertex_shader, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetShaderiv(c.vertex_shader, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetShaderInfoLog(c.vertex_shader, len, nullptr, log.data());
    throw CompileError(fmt::format("GLES: the built-in full-screen vertex shader failed to compile on '{}':\n"
                                   "{}\n{}",
                                   caps_.renderer, log.c_str(), mark_source_lines(kVertexShader, log, kAllSourceLines)));
  }

  // Float render targets: test, do not trust the extension string (TF.js webgl_util does the same).
  {
    GLuint tex = 0, fbo = 0;
    glGenTextures(1, &tex);
    glBindTexture(GL_TEXTURE_2D, tex);
    glTexStorage2D(GL_TEXTURE_2D, 1, GL_RGBA32F, 1, 1);
    glGenFramebuffers(1, &fbo);
    glBindFramebuffer(GL_FRAMEBUFFER, fbo);
    glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0);
    GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    glDeleteFramebuffers(1, &fbo);
    glDeleteTextures(1, &tex);
    std::string errs = drain_gl_errors();
    caps_.color_buffer_float = status == GL_FRAMEBUFFER_COMPLETE && errs.empty();
    if (!caps_.color_buffer_float)
      caps_.roundtrip_detail = fmt::format("not run: RGBA32F framebuffer {}{}", fbo_status_name(status),
                                           errs.empty() ? "" : " (" + errs + ")");
  }

  // fp32 round trip through a copy shader, bit-exact.
  if (caps_.color_buffer_float) {
    max_width_ = caps_.max_texture_size;  // provisional, for the probe's layouts
    const float pattern[8] = {0.123456789f, 1e-30f, 1e30f, -3.5f, 16777216.0f, 1.0f / 3.0f,
                              -2.718281828f, 6.1035156e-05f};
    try {
      Texture src = create_texture(TextureLayout::for_numel(8, 2), "fp32 probe src");
      Texture dst = create_texture(TextureLayout::for_numel(8, 2), "fp32 probe dst");
      upload(src, pattern, 8);
      Program copy = create_program(kCopyShader, "fp32_roundtrip_probe", ShaderInterface{{"u_src"}, 1});
      std::pair<std::string, const Texture*> in[] = {{"u_src", &src}};
      draw(copy, in, dst, "fp32_roundtrip_probe");
      float got[8] = {};
      download(dst, got, 8);
      caps_.fp32_roundtrip_ok = true;
      caps_.roundtrip_detail = "bit-exact (8 values)";
      for (int i = 0; i < 8; ++i) {
        if (std::memcmp(&got[i], &pattern[i], sizeof(float)) != 0) {
          caps_.fp32_roundtrip_ok = false;
          caps_.roundtrip_detail = fmt::format("highp below fp32: got {:.9g} for {:.9g}", got[i], pattern[i]);
          break;
        }
      }
    } catch (const Error& e) {
      caps_.fp32_roundtrip_ok = false;
      caps_.roundtrip_detail = std::string("probe failed: ") + e.what();
    }
  }
}

nlohmann::json Device::caps_json() const {
  nlohmann::json j;
  j["renderer"] = caps_.renderer;
  j["version"] = caps_.version;
  j["glsl_version"] = caps_.glsl_version;
  j["vendor"] = caps_.vendor;
  j["max_texture_size"] = caps_.max_texture_size;
  j["max_texture_units"] = caps_.max_texture_units;
  j["max_draw_buffers"] = caps_.max_draw_buffers;
  j["color_buffer_float"] = caps_.color_buffer_float;
  j["timer_query"] = caps_.timer_query;
  j["highp_float_precision"] = caps_.highp_float_precision;
  j["fp32_roundtrip_ok"] = caps_.fp32_roundtrip_ok;
  j["roundtrip_detail"] = caps_.roundtrip_detail;
  j["egl_platform"] = caps_.egl_platform;
  j["egl_device"] = caps_.egl_device;
  j["surfaceless_context"] = caps_.surfaceless_context;
  j["context_version"] = fmt::format("{}.{}", caps_.context_major, caps_.context_minor);
  j["extensions"] = caps_.extensions;
  j["max_texture_width"] = max_width_;
  j["compute"] = caps_.compute;
  if (caps_.compute) {
    j["max_compute_storage_blocks"] = caps_.max_compute_storage_blocks;
    j["max_compute_invocations"] = caps_.max_compute_invocations;
    j["max_compute_shared_bytes"] = caps_.max_compute_shared_bytes;
    j["max_compute_workgroup_count"] = caps_.max_compute_workgroup_count;
    j["max_compute_workgroup_size"] = caps_.max_compute_workgroup_size;
    j["max_storage_block_bytes"] = caps_.max_storage_block_bytes;
  }
  return j;
}

TextureLayout Device::layout_for(int64_t numel) const {
  return TextureLayout::for_numel(numel, max_width_, caps_.max_texture_size);
}

LiveObjects Device::live_objects() const { return ctx_->live; }

void Device::check_gl(const char* step, std::string_view kernel) const { gl_check(step, kernel_where(kernel)); }

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
  t.ctx_ = ctx_;
  t.layout_ = layout;
  t.alloc_width_ = alloc_width;
  t.alloc_height_ = alloc_height;
  t.name_ = std::string(name);
  glGenTextures(1, &t.id_);
  if (t.id_ == 0) {
    t.ctx_.reset();
    gl_check("glGenTextures", where);
    throw BackendError(fmt::format("GLES: glGenTextures returned 0 ({})", where));
  }
  ++ctx_->live.textures;
  glBindTexture(GL_TEXTURE_2D, t.id_);
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
  if (!texture.valid() || texture.ctx_ != ctx_)
    throw ValueError(fmt::format("gles::Device::create_framebuffer ({}): the texture is empty or belongs to "
                                 "another device",
                                 kernel_where(kernel_name)));
  ctx_->make_current();
  const std::string where = fmt::format("{}, {}", kernel_where(kernel_name), texture_where(texture.name()));
  Framebuffer f;
  f.ctx_ = ctx_;
  f.width_ = texture.alloc_width();
  f.height_ = texture.alloc_height();
  glGenFramebuffers(1, &f.id_);
  if (f.id_ == 0) {
    f.ctx_.reset();
    gl_check("glGenFramebuffers", where);
    throw BackendError(fmt::format("GLES: glGenFramebuffers returned 0 ({})", where));
  }
  ++ctx_->live.framebuffers;
  glBindFramebuffer(GL_FRAMEBUFFER, f.id_);
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
  p.ctx_ = ctx_;
  p.name_ = kernel_name;
  p.id_ = glCreateProgram();
  if (p.id_ == 0) {
    glDeleteShader(fs);
    p.ctx_.reset();
    gl_check("glCreateProgram", where);
    throw BackendError(fmt::format("GLES: glCreateProgram returned 0 ({})", where));
  }
  ++ctx_->live.programs;
  glAttachShader(p.id_, ctx_->vertex_shader);
  glAttachShader(p.id_, fs);
  glLinkProgram(p.id_);
  glDetachShader(p.id_, ctx_->vertex_shader);
  glDetachShader(p.id_, fs);
  glDeleteShader(fs);
  glGetProgramiv(p.id_, GL_LINK_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetProgramiv(p.id_, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetProgramInfoLog(p.id_, static_cast<GLsizei>(log.size()), nullptr, log.data());
    log.resize(std::strlen(log.c_str()));
    drain_gl_errors();
    throw CompileError(fmt::format(
        "GLES: program of kernel '{}' failed to link on '{}':\n{}\n--- fragment source ---\n{}", kernel_name,
        caps_.renderer, log, mark_source_lines(fragment_source, log, kAllSourceLines)));
  }
  gl_check("glLinkProgram", where);

  GLint n_uniforms = 0, max_len = 0;
  glGetProgramiv(p.id_, GL_ACTIVE_UNIFORMS, &n_uniforms);
  glGetProgramiv(p.id_, GL_ACTIVE_UNIFORM_MAX_LENGTH, &max_len);
  std::string name_buf(static_cast<size_t>(std::max(max_len, 1)) + 1, '\0');
  for (GLint i = 0; i < n_uniforms; ++i) {
    GLsizei len = 0;
    GLint size = 0;
    GLenum type = 0;
    glGetActiveUniform(p.id_, static_cast<GLuint>(i), static_cast<GLsizei>(name_buf.size()), &len, &size, &type,
                       name_buf.data());
    if (!is_sampler_type(type)) continue;
    std::string uname(name_buf.data(), static_cast<size_t>(len));
    p.samplers_.emplace_back(uname, glGetUniformLocation(p.id_, uname.c_str()));
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
  if (!texture.valid() || texture.ctx_ != ctx_)
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
  if (!texture.valid() || texture.ctx_ != ctx_)
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
    if (!t || !t->valid() || t->ctx_ != ctx_)
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
    if (!tex || !tex->valid() || tex->ctx_ != ctx_)
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
  if (!program.valid() || program.ctx_ != ctx_)
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

Buffer::Buffer(Buffer&& o) noexcept
    : ctx_(std::move(o.ctx_)), id_(std::exchange(o.id_, 0u)), numel_(o.numel_), bytes_(o.bytes_),
      name_(std::move(o.name_)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    id_ = std::exchange(o.id_, 0u);
    numel_ = o.numel_;
    bytes_ = o.bytes_;
    name_ = std::move(o.name_);
  }
  return *this;
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (id_ && ctx_) {
    if (ctx_->try_make_current()) glDeleteBuffers(1, &id_);
    --ctx_->live.buffers;
  }
  id_ = 0;
  ctx_.reset();
}

ComputeProgram::ComputeProgram(ComputeProgram&& o) noexcept
    : ctx_(std::move(o.ctx_)), id_(std::exchange(o.id_, 0u)), name_(std::move(o.name_)), local_size_(o.local_size_) {}

ComputeProgram& ComputeProgram::operator=(ComputeProgram&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::move(o.ctx_);
    id_ = std::exchange(o.id_, 0u);
    name_ = std::move(o.name_);
    local_size_ = o.local_size_;
  }
  return *this;
}

ComputeProgram::~ComputeProgram() { reset(); }

void ComputeProgram::reset() {
  if (id_ && ctx_) {
    if (ctx_->try_make_current()) glDeleteProgram(id_);
    --ctx_->live.programs;
  }
  id_ = 0;
  ctx_.reset();
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
  b.ctx_ = ctx_;
  b.numel_ = numel;
  b.bytes_ = bytes;
  b.name_ = std::string(name);
  glGenBuffers(1, &b.id_);
  if (b.id_ == 0) {
    b.ctx_.reset();
    gl_check("glGenBuffers", where);
    throw BackendError(fmt::format("GLES: glGenBuffers returned 0 ({})", where));
  }
  ++ctx_->live.buffers;
  staging_.assign(static_cast<size_t>(bytes / 4), 0.0f);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, b.id_);
  glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(bytes), staging_.data(), GL_DYNAMIC_DRAW);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  gl_check(fmt::format("glBufferData(GL_SHADER_STORAGE_BUFFER, {} bytes)", bytes), where);
  return b;
}

void Device::upload(Buffer& buffer, const float* data, int64_t numel) {
  if (!buffer.valid() || buffer.ctx_ != ctx_)
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
  if (!buffer.valid() || buffer.ctx_ != ctx_)
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
  p.ctx_ = ctx_;
  p.name_ = kernel_name;
  p.id_ = glCreateProgram();
  if (p.id_ == 0) {
    glDeleteShader(cs);
    p.ctx_.reset();
    gl_check("glCreateProgram", where);
    throw BackendError(fmt::format("GLES: glCreateProgram returned 0 ({})", where));
  }
  ++ctx_->live.programs;
  glAttachShader(p.id_, cs);
  glLinkProgram(p.id_);
  glDetachShader(p.id_, cs);
  glDeleteShader(cs);
  glGetProgramiv(p.id_, GL_LINK_STATUS, &ok);
  if (!ok) {
    std::string log = info_log(p.id_, true);
    drain_gl_errors();
    throw CompileError(fmt::format("GLES: compute program of kernel '{}' failed to link on '{}':\n{}\n--- source ---\n{}",
                                   kernel_name, caps_.renderer, log, mark_source_lines(es310_source, log, kAllSourceLines)));
  }
  GLint ls[3] = {0, 0, 0};
  glGetProgramiv(p.id_, GL_COMPUTE_WORK_GROUP_SIZE, ls);
  p.local_size_ = {ls[0], ls[1], ls[2]};
  gl_check("glLinkProgram (compute)", where);
  return p;
}

void Device::dispatch(const ComputeProgram& program, llvm::ArrayRef<const Buffer*> bindings,
                      const std::array<uint32_t, 3>& groups, const std::string& kernel_name) {
  require_compute("dispatch");
  if (!program.valid() || program.ctx_ != ctx_)
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
    if (!bindings[b] || !bindings[b]->valid() || bindings[b]->ctx_ != ctx_)
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
