// shadergrad — the GLES device's EGL context, creation and capabilities (see sg/gles_device.h, gles_context.h).
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
// Names of EGL / GL enums for messages
// ---------------------------------------------------------------------------------------------------------

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

namespace {
// EGL displays are not reference counted by EGL (one eglTerminate ends every context on it), and the same
// platform + native display returns the same EGLDisplay. Count our own users so one Device's teardown or a
// failed attempt never terminates a display another Device is using.
std::mutex g_display_mutex;
std::map<EGLDisplay, int> g_display_users;
}  // namespace

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

namespace {

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

}  // namespace

namespace {

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
// GlName (UniqueHandle of GlTraits): the owner of every GL object a handle holds
// ---------------------------------------------------------------------------------------------------------
namespace detail {

namespace {
/// The LiveObjects count of kind k.
int64_t& live_count(LiveObjects& live, GlKind k) {
  switch (k) {
    case GlKind::Framebuffer: return live.framebuffers;
    case GlKind::Texture: return live.textures;
    case GlKind::Program: return live.programs;
    case GlKind::Buffer: break;
  }
  return live.buffers;
}
}  // namespace

template <GlKind K>
void GlTraits<K>::count(Context& ctx) {
  ++live_count(ctx.live, K);
}

template <GlKind K>
void GlTraits<K>::destroy(Context& ctx, unsigned id) noexcept {
  if (ctx.try_make_current()) {
    switch (K) {
      case GlKind::Framebuffer: glDeleteFramebuffers(1, &id); break;
      case GlKind::Texture:  // the multiple-render-target framebuffers it is attached to go first
        ctx.detach_from_mrt(id);
        glDeleteTextures(1, &id);
        break;
      case GlKind::Program: glDeleteProgram(id); break;
      case GlKind::Buffer: glDeleteBuffers(1, &id); break;
    }
  }
  --live_count(ctx.live, K);
}

template <GlKind K>
GlName<K> create_gl_name(const std::shared_ptr<Context>& ctx, std::string_view where) {
  ctx->make_current();
  GLuint id = 0;
  const char* call = "";
  switch (K) {
    case GlKind::Framebuffer: glGenFramebuffers(1, &id), call = "glGenFramebuffers"; break;
    case GlKind::Texture: glGenTextures(1, &id), call = "glGenTextures"; break;
    case GlKind::Program: id = glCreateProgram(), call = "glCreateProgram"; break;
    case GlKind::Buffer: glGenBuffers(1, &id), call = "glGenBuffers"; break;
  }
  if (id == 0) {
    gl_check(call, where);
    throw BackendError(fmt::format("GLES: {} returned 0 ({})", call, where));
  }
  return GlName<K>::adopt(ctx, id);
}

template struct GlTraits<GlKind::Framebuffer>;
template struct GlTraits<GlKind::Texture>;
template struct GlTraits<GlKind::Program>;
template struct GlTraits<GlKind::Buffer>;
template GlName<GlKind::Framebuffer> create_gl_name(const std::shared_ptr<Context>&, std::string_view);
template GlName<GlKind::Texture> create_gl_name(const std::shared_ptr<Context>&, std::string_view);
template GlName<GlKind::Program> create_gl_name(const std::shared_ptr<Context>&, std::string_view);
template GlName<GlKind::Buffer> create_gl_name(const std::shared_ptr<Context>&, std::string_view);

}  // namespace detail

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

}  // namespace sg::gles
