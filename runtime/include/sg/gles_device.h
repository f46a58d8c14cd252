// shadergrad — low-level headless EGL + OpenGL ES 3 device (the fragment-shader backend's GL layer).
//
// What it does: opens a GLES 3.x context without a window, allocates tensors as RGBA32F textures (layout in
// sg/texture_layout.h), compiles ES 3.00 fragment shaders, and runs one kernel = one full-screen draw into
// the output texture (or, with multiple render targets, into up to caps().max_draw_buffers output textures
// at once). The plan executor sits on top of this; nothing here knows about graphs or plans.
//
// Typical use:
//   auto dev = sg::gles::Device::create({});
//   sg::gles::Texture a = dev->create_texture(n, "a"), out = dev->create_texture(n, "out");
//   dev->upload(a, host_a.data(), n);
//   sg::gles::Program p = dev->create_program(fragment_es300_source, "my_kernel");
//   dev->draw(p, {{"u_a", &a}}, out, "my_kernel");
//   dev->download(out, host_out.data(), n);
//
// Conventions for fragment shaders run by draw(): `#version 300 es`, `precision highp float;`, one
// `out vec4` (location 0) — or, for the multiple-render-target draw, `layout(location = j) out vec4 ...` for
// output j = 0..n-1; the fragment at texel (x, y) is gl_FragCoord.xy - 0.5 (use ivec2(gl_FragCoord.xy))
// and should compute the 4 elements of texel y * width + x of the output, reading inputs with texelFetch.
// Every texel of the output texture is drawn, padding included, so a kernel should write 0 (or anything
// harmless) for texels past the output's numel.
//
// Threading: a Device and its handles belong to one thread at a time. Every operation makes the device's
// context current first, so several Devices can be used from one thread.
//
// Lifetime: Texture / Program / Framebuffer handles keep the GL context alive (shared ownership), so they may
// outlive the Device object; GL objects are deleted when the handles are destroyed.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <nlohmann/json_fwd.hpp>

#include "sg/shader_compiler.h"  // ShaderInterface
#include "sg/texture_layout.h"
#include "sg/unique_handle.h"

namespace sg::gles {

namespace detail {
using sg::detail::UniqueHandle;
struct Context;  // EGL display/context + GL function pointers + live-object counters (runtime/src/gles_context.h)

/// The kinds of GL objects the handles own: how each is created (glGen* / glCreateProgram), deleted and counted in
/// LiveObjects (runtime/src/gles_context.cpp).
enum class GlKind : uint8_t { Framebuffer, Texture, Program, Buffer };
/// UniqueHandle's traits for a GL name of kind K: count() counts one more in the context's LiveObjects, destroy()
/// deletes it (with the context made current when it can be; a texture's multiple-render-target framebuffers first)
/// and counts it off either way.
template <GlKind K>
struct GlTraits {
  using Context = detail::Context;
  using Handle = unsigned;
  static void count(Context& ctx);
  static void destroy(Context& ctx, unsigned id) noexcept;
};
/// The owner of a GL object name every GL handle (Framebuffer, Texture, Program, Buffer, ComputeProgram) holds.
template <GlKind K>
using GlName = UniqueHandle<GlTraits<K>>;
/// A new name of kind K in `ctx` (made current), owned and counted. Throws BackendError naming `where` when GL
/// returns 0.
template <GlKind K>
GlName<K> create_gl_name(const std::shared_ptr<Context>& ctx, std::string_view where);
}

/// Options for Device::create.
struct DeviceOptions {
  /// Largest texture width in texels used for tensor layouts. 0 = the device's GL_MAX_TEXTURE_SIZE; a
  /// smaller value forces row wrapping (tests). Heights are always limited by GL_MAX_TEXTURE_SIZE.
  /// Larger than the device limit or negative -> sg::ValueError.
  int64_t max_texture_width = 0;
  /// Refuse devices that cannot store and render fp32 exactly (no color-renderable RGBA32F, or the fp32
  /// round-trip probe fails) with sg::BackendError. false = create anyway; check caps().
  bool require_fp32 = true;
  /// Which EGL platform to use: "" = try "device", "surfaceless", "default" in that order (see create()).
  /// Naming one tries only that one.
  std::string platform{};
};

/// What the probe at creation found. All strings are as the driver reports them.
struct Caps {
  std::string renderer;       ///< GL_RENDERER, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string version;        ///< GL_VERSION, e.g. "OpenGL ES 3.2 Mesa 22.3.6"
  std::string glsl_version;   ///< GL_SHADING_LANGUAGE_VERSION
  std::string vendor;         ///< GL_VENDOR
  int64_t max_texture_size = 0;   ///< GL_MAX_TEXTURE_SIZE (texels per dimension)
  int64_t max_texture_units = 0;  ///< GL_MAX_TEXTURE_IMAGE_UNITS (fragment-shader samplers per draw)
  /// Output textures one draw can write: min(GL_MAX_DRAW_BUFFERS, GL_MAX_COLOR_ATTACHMENTS); ES 3.0
  /// guarantees >= 4 (8 on NVIDIA and Mesa llvmpipe).
  int64_t max_draw_buffers = 0;
  bool color_buffer_float = false;  ///< an RGBA32F texture makes a complete framebuffer (tested, not assumed)
  bool timer_query = false;         ///< GL_EXT_disjoint_timer_query with all entry points loadable
  int highp_float_precision = 0;    ///< mantissa bits of highp float in fragment shaders (23 = fp32)
  bool fp32_roundtrip_ok = false;   ///< a texelFetch copy shader reproduces fp32 bit patterns exactly
  std::string roundtrip_detail;     ///< "bit-exact (8 values)" or "highp below fp32: got X for Y" or why not run
  std::string egl_platform;         ///< platform that worked: "device", "surfaceless" or "default"
  std::string egl_device;           ///< for "device": the EGL device's extension string (driver hint)
  bool surfaceless_context = false; ///< context current with EGL_NO_SURFACE (false: a 1x1 pbuffer is bound)
  int context_major = 0, context_minor = 0;  ///< ES context version requested (3.2, 3.1 or 3.0)
  std::vector<std::string> extensions;       ///< GL extensions (glGetStringi)
  // Compute (GLES 3.1 contexts only; all 0 / false on an ES 3.0 context):
  bool compute = false;                        ///< compute shaders and shader storage buffers (ES >= 3.1)
  int64_t max_compute_storage_blocks = 0;      ///< GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS (ES 3.1 guarantees 4)
  int64_t max_compute_invocations = 0;         ///< GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS (>= 128)
  int64_t max_compute_shared_bytes = 0;        ///< GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, bytes (>= 16384)
  std::array<int64_t, 3> max_compute_workgroup_count{};  ///< GL_MAX_COMPUTE_WORK_GROUP_COUNT per dimension (>= 65535)
  std::array<int64_t, 3> max_compute_workgroup_size{};   ///< GL_MAX_COMPUTE_WORK_GROUP_SIZE per dimension
  int64_t max_storage_block_bytes = 0;         ///< GL_MAX_SHADER_STORAGE_BLOCK_SIZE, bytes (>= 2^27)
};

/// Numbers of GL objects currently alive through handles of one Device (leak tests). `framebuffers`
/// includes the Device's framebuffers of multiple-render-target draws: one per set of output textures drawn
/// into (in slot order), each deleted with the first of its textures to go, all with the Device.
struct LiveObjects {
  int64_t textures = 0;
  int64_t programs = 0;
  int64_t framebuffers = 0;
  int64_t buffers = 0;  ///< shader storage buffers (Buffer)
  bool operator==(const LiveObjects&) const = default;
};

class Device;

/// A framebuffer object with one texture attached as COLOR_ATTACHMENT0 (the render target of a draw).
/// Completeness is checked when it is created. Move-only; deletes the FBO when destroyed. It does not own
/// the texture: destroy it before the texture (a Texture owns its own Framebuffer, see Texture).
class Framebuffer {
 public:
  Framebuffer() = default;
  Framebuffer(Framebuffer&& o) noexcept = default;
  Framebuffer& operator=(Framebuffer&& o) noexcept = default;
  Framebuffer(const Framebuffer&) = delete;
  Framebuffer& operator=(const Framebuffer&) = delete;
  ~Framebuffer() = default;

  bool valid() const { return gl_.get() != 0; }
  unsigned id() const { return gl_.get(); }  ///< GL framebuffer name
  int64_t width() const { return width_; }
  int64_t height() const { return height_; }

 private:
  friend class Device;
  detail::GlName<detail::GlKind::Framebuffer> gl_;
  int64_t width_ = 0, height_ = 0;
};

/// A tensor stored in an RGBA32F 2-D texture (NEAREST filtering, CLAMP_TO_EDGE, one mip level, immutable
/// storage via glTexStorage2D). Zero-filled when created. Each texture owns a complete Framebuffer (created
/// with it) so it can be a draw target and be read back. Move-only.
class Texture {
 public:
  Texture() = default;
  Texture(Texture&& o) noexcept = default;
  Texture& operator=(Texture&& o) noexcept = default;
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  ~Texture() = default;

  bool valid() const { return gl_.get() != 0; }
  unsigned id() const { return gl_.get(); }  ///< GL texture name
  const TextureLayout& layout() const { return layout_; }
  int64_t width() const { return layout_.width; }    ///< texels of the layout (addressing)
  int64_t height() const { return layout_.height; }  ///< texels of the layout (addressing)
  /// The GL storage size in texels (>= width() x height()): larger when a union-domain draw writes it (see the
  /// viewport overload of Device::draw); texels outside the layout are never read.
  int64_t alloc_width() const { return alloc_width_; }
  int64_t alloc_height() const { return alloc_height_; }
  int64_t numel() const { return layout_.numel; }    ///< logical elements it was sized for
  const std::string& name() const { return name_; }  ///< debug name given at creation
  const Framebuffer& framebuffer() const { return fbo_; }

 private:
  friend class Device;
  detail::GlName<detail::GlKind::Texture> gl_;
  TextureLayout layout_;
  int64_t alloc_width_ = 0, alloc_height_ = 0;
  std::string name_;
  Framebuffer fbo_;
};

/// A linked GLSL ES 3.00 program: the fixed full-screen-triangle vertex shader (Device::vertex_shader_source)
/// plus one fragment shader. Move-only.
class Program {
 public:
  Program() = default;
  Program(Program&& o) noexcept = default;
  Program& operator=(Program&& o) noexcept = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() = default;

  bool valid() const { return gl_.get() != 0; }
  unsigned id() const { return gl_.get(); }                ///< GL program name
  const std::string& name() const { return name_; }  ///< kernel name
  /// Active sampler uniforms (name, location) as the linker reports them.
  const std::vector<std::pair<std::string, int>>& samplers() const { return samplers_; }
  /// Sampler uniforms the program declares (active or optimised out): the ShaderInterface given to
  /// create_program (from the emitter's SPIR-V by SPIRV-Cross reflection), else the active ones.
  const std::vector<std::string>& declared_samplers() const { return declared_samplers_; }
  /// Colour outputs the program declares (ShaderInterface::outputs given to create_program); 0 when not given
  /// (then draws do not check their number of output textures).
  int fragment_outputs() const { return fragment_outputs_; }

 private:
  friend class Device;
  detail::GlName<detail::GlKind::Program> gl_;
  std::string name_;
  std::vector<std::pair<std::string, int>> samplers_;
  std::vector<std::string> declared_samplers_;
  int fragment_outputs_ = 0;
};

/// A shader storage buffer of floats (GLES 3.1 compute), zero-filled when created, its size rounded up to a
/// whole vec4 (16 bytes) so kernels may read 4 floats at a multiple-of-4 index below numel(). Move-only; deletes
/// the GL buffer when destroyed.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept = default;
  Buffer& operator=(Buffer&& o) noexcept = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() = default;

  bool valid() const { return gl_.get() != 0; }
  unsigned id() const { return gl_.get(); }                ///< GL buffer name
  int64_t numel() const { return numel_; }           ///< floats it was sized for
  int64_t bytes() const { return bytes_; }           ///< allocated bytes (numel rounded up to 4 floats, x 4)
  const std::string& name() const { return name_; }  ///< debug name given at creation

 private:
  friend class Device;
  detail::GlName<detail::GlKind::Buffer> gl_;
  int64_t numel_ = 0, bytes_ = 0;
  std::string name_;
};

/// A linked GLSL ES 3.10 compute program. Move-only.
class ComputeProgram {
 public:
  ComputeProgram() = default;
  ComputeProgram(ComputeProgram&& o) noexcept = default;
  ComputeProgram& operator=(ComputeProgram&& o) noexcept = default;
  ComputeProgram(const ComputeProgram&) = delete;
  ComputeProgram& operator=(const ComputeProgram&) = delete;
  ~ComputeProgram() = default;

  bool valid() const { return gl_.get() != 0; }
  unsigned id() const { return gl_.get(); }
  const std::string& name() const { return name_; }
  /// GL_COMPUTE_WORK_GROUP_SIZE as the linker reports it.
  const std::array<int64_t, 3>& local_size() const { return local_size_; }

 private:
  friend class Device;
  detail::GlName<detail::GlKind::Program> gl_;
  std::string name_;
  std::array<int64_t, 3> local_size_{};
};

/// An elapsed-time measurement started by Device::begin_timer. ns() waits for the result the first time.
/// Move-only (owns a GL query object when GPU timer queries are used).
class TimerResult {
 public:
  TimerResult() = default;
  TimerResult(TimerResult&& o) noexcept;
  TimerResult& operator=(TimerResult&& o) noexcept;
  TimerResult(const TimerResult&) = delete;
  TimerResult& operator=(const TimerResult&) = delete;
  ~TimerResult();

  /// Elapsed nanoseconds; blocks until the GPU has the result. -1 when there is no measurement or the GPU
  /// reported a disjoint event (GL_GPU_DISJOINT_EXT: frequency change, context switch) during it.
  int64_t ns();
  /// ns() in milliseconds, or NaN when ns() < 0.
  double ms();
  /// true: GPU time from GL_TIME_ELAPSED_EXT; false: CPU wall time between two glFinish calls.
  bool gpu() const { return gpu_; }

 private:
  friend class Device;
  void reset();
  std::shared_ptr<detail::Context> ctx_;
  unsigned query_ = 0;
  bool gpu_ = false;
  int64_t ns_ = -1;
};

/// A headless GLES 3 context and the operations the fragment backend needs. Non-copyable.
/// Every operation may throw sg::BackendError (GL error, naming the step and the kernel) and validates its
/// arguments with sg::ValueError.
class Device {
 public:
  /// Opens a headless context. Tries, in order (or only DeviceOptions::platform):
  ///   "device":      eglQueryDevicesEXT + eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT) — NVIDIA's
  ///                  headless path; hardware devices before Mesa's software device;
  ///   "surfaceless": eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA) — Mesa (llvmpipe here);
  ///   "default":     eglGetDisplay(EGL_DEFAULT_DISPLAY).
  /// On each: eglInitialize, a config with EGL_PBUFFER_BIT + EGL_OPENGL_ES3_BIT, an ES 3.2 / 3.1 / 3.0
  /// context, made current with EGL_NO_SURFACE (or a 1x1 pbuffer if that is refused). A failed attempt is
  /// fully undone before the next. Then probes Caps (including the fp32 round trip).
  /// Throws sg::BackendError listing every attempt and why it failed, or (require_fp32) why the device
  /// cannot do fp32; sg::ValueError for bad options.
  static std::unique_ptr<Device> create(const DeviceOptions& options = {});

  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  const Caps& caps() const { return caps_; }
  /// Caps as JSON (same field names as Caps).
  nlohmann::json caps_json() const;
  /// The texture width limit used for layouts: DeviceOptions::max_texture_width or MAX_TEXTURE_SIZE.
  int64_t max_texture_width() const { return max_width_; }
  /// TextureLayout::for_numel(numel, max_texture_width(), caps().max_texture_size).
  TextureLayout layout_for(int64_t numel) const;

  /// The fixed vertex shader every Program uses: a full-screen triangle from gl_VertexID, no attributes.
  static const char* vertex_shader_source();

  // --- resources -----------------------------------------------------------------------------------------

  /// A zero-filled RGBA32F texture for `numel` elements (layout_for(numel)) with its framebuffer.
  /// Throws ValueError if it does not fit, BackendError on GL errors or an incomplete framebuffer.
  Texture create_texture(int64_t numel, std::string_view name = "");
  /// Same with an explicit layout (width within max_texture_width(), height within MAX_TEXTURE_SIZE).
  Texture create_texture(const TextureLayout& layout, std::string_view name = "");
  /// Same, with GL storage of alloc_width x alloc_height texels (>= the layout's, <= MAX_TEXTURE_SIZE; ValueError
  /// otherwise): addressing, uploads and downloads follow `layout`; the extra texels (zero-filled) only let a
  /// larger draw (union-domain kernels) render into it. Texture::alloc_width()/alloc_height() report it.
  Texture create_texture(const TextureLayout& layout, std::string_view name, int64_t alloc_width,
                         int64_t alloc_height);
  /// Compiles `fragment_source` (GLSL ES 3.00) with vertex_shader_source() and links them. `declared`: what the
  /// source declares (CompiledShader::declared for generated kernels; hand-written shaders may state it), used to
  /// accept inputs for samplers the driver optimised out and to check draws' output counts; without it only the
  /// linker's active samplers are known. Throws sg::CompileError with the kernel name, the info log and the source
  /// with line numbers, lines the log blames marked ">>" (sg::mark_source_lines).
  Program create_program(const std::string& fragment_source, const std::string& kernel_name,
                         const std::optional<ShaderInterface>& declared = std::nullopt);
  /// A framebuffer with `texture` as COLOR_ATTACHMENT0. Throws BackendError naming the completeness status
  /// and `kernel_name` if incomplete. (Textures already own one; this is for callers that want their own.)
  Framebuffer create_framebuffer(const Texture& texture, std::string_view kernel_name = "");
  /// Counts of live handles' GL objects (textures, programs, framebuffers) created by this device.
  LiveObjects live_objects() const;

  // --- data transfer (fp32, host row-major) ---------------------------------------------------------------

  /// Writes data[0, numel) into the texture (element e to texel e/4, component e%4) and zeros the rest of
  /// the texture. numel must be <= texture.numel() (ValueError otherwise); data may be null if numel == 0.
  /// Textures of 64 KiB or more go through a pixel unpack buffer (one memcpy into the mapped, orphaned buffer,
  /// then glTexSubImage2D from it, so the driver's copy into the texture runs on the GPU side); smaller ones,
  /// or when mapping fails, from client memory.
  void upload(Texture& texture, const float* data, int64_t numel);
  /// Reads the first numel elements (numel <= texture.numel()) into out. Waits for pending draws.
  void download(const Texture& texture, float* out, int64_t numel);

  // --- kernels -----------------------------------------------------------------------------------------

  /// Runs `program` once over every texel of `output`: binds inputs[i] to texture unit i and sets the
  /// sampler uniform named inputs[i].first to i, renders into output's framebuffer with viewport
  /// output.width() x output.height(), glDrawArrays(GL_TRIANGLES, 0, 3).
  /// A name that is not an active sampler is skipped only when the fragment source declares it (the
  /// compiler optimised an unused sampler out); an undeclared name is a ValueError (typo), as is an active
  /// sampler left without an input, an input that is also the output (feedback loop), or more inputs than
  /// texture units. GL errors after each step throw BackendError naming the GL error, step and kernel.
  /// With profiling on, the draw is timed (see last_draw_ms()).
  void draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
            Texture& output, const std::string& kernel_name);
  /// Multiple render targets: one draw writes every texture of `outputs` at once. Output j is attached as
  /// GL_COLOR_ATTACHMENT0 + j and receives the shader's `layout(location = j) out vec4`; glDrawBuffers
  /// enables all of them; the viewport is the outputs' common width() x height(). Inputs are bound as in
  /// the single-output draw (same sampler rules). One output is exactly the single-output draw (the
  /// texture's own framebuffer); two or more use a device-owned framebuffer per set of outputs (created,
  /// attached and checked complete by the first draw into that set, then only bound: re-attaching one scratch
  /// framebuffer per draw cost ~0.05-0.1 ms of submission per MLP step on the H200; deleted with any of its
  /// textures, or with the Device; at most 256 are kept).
  /// ValueError (naming the kernel and the problem) for: no outputs; more than caps().max_draw_buffers;
  /// a null, empty or other-device output; outputs of different width/height; the same texture twice among
  /// the outputs; an output that is also an input (feedback loop); an output count other than
  /// program.fragment_outputs() when that is known (> 0) — undeclared locations would be left undefined;
  /// plus everything the single-output draw checks. BackendError naming the framebuffer status and the
  /// kernel if the framebuffer is incomplete, or the GL error and step. Timed with profiling on,
  /// like the single-output draw (last_draw_ms()).
  void draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
            llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name);
  /// Union-domain draw: like the multiple-render-target draw, but the outputs may have different layouts and
  /// the viewport is viewport_width x viewport_height texels (the kernel's extent: the widest x the tallest output
  /// layout). GLES renders only inside every attachment, so each output must be ALLOCATED at least that large
  /// (Texture::alloc_width/alloc_height; ValueError naming the output otherwise); the shader computes, per output,
  /// the fragments inside that output's own layout. One output is allowed (then the texture's own framebuffer is
  /// used). A viewport smaller than 1x1 is a ValueError; the other checks are those of the draw above except
  /// that outputs need not share a size.
  void draw(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
            llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name, int64_t viewport_width,
            int64_t viewport_height);
  /// glFinish: waits until every submitted command has completed.
  void finish();
  /// glFlush: hands the commands issued so far to the GPU without waiting for them (drivers otherwise buffer them
  /// until a buffer fills or something waits, e.g. the readback at the end of a step).
  void flush();

  // --- compute (GLES 3.1; every call throws BackendError naming the missing support on an ES 3.0 context) --

  /// A zero-filled shader storage buffer for `numel` floats (see Buffer). ValueError when numel < 0 or the
  /// size exceeds caps().max_storage_block_bytes (naming GL_MAX_SHADER_STORAGE_BLOCK_SIZE).
  Buffer create_buffer(int64_t numel, std::string_view name = "");
  /// Writes data[0, numel) into the buffer and zeros the rest of it (numel <= buffer.numel(), ValueError
  /// otherwise). glBufferSubData.
  void upload(Buffer& buffer, const float* data, int64_t numel);
  /// Reads the first numel floats (glMapBufferRange GL_MAP_READ_BIT; waits for pending dispatches).
  void download(const Buffer& buffer, float* out, int64_t numel);
  /// Compiles and links a GLSL ES 3.10 compute shader. CompileError with the kernel name, the driver's log and
  /// the numbered source (blamed lines marked ">>").
  ComputeProgram create_compute_program(const std::string& es310_source, const std::string& kernel_name);
  /// Binds bindings[b] to GL_SHADER_STORAGE_BUFFER binding point b, glDispatchCompute(groups), then
  /// glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT) so later dispatches,
  /// uploads and downloads see the writes. ValueError (naming the kernel) for a null or other-device buffer,
  /// more bindings than GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, or a group count of 0 or above
  /// GL_MAX_COMPUTE_WORK_GROUP_COUNT; BackendError on GL errors. Timed with profiling on (last_draw_ms()).
  void dispatch(const ComputeProgram& program, llvm::ArrayRef<const Buffer*> bindings,
                const std::array<uint32_t, 3>& groups, const std::string& kernel_name);

  // --- timing (benchmarks and profiling only; never for pass/fail tests) --------------------------------

  /// Whether GL_EXT_disjoint_timer_query is usable (else timers are CPU time between two glFinish calls).
  /// True when begin_timer/end_timer use GL timer queries: the extension exists and the renderer is not llvmpipe,
  /// whose GL_TIME_ELAPSED results were measured far off (8.5 ms reported for a 270 ms draw); there, and without
  /// the extension, timing is glFinish-bounded CPU time.
  bool timer_queries_available() const {
    return caps_.timer_query && caps_.renderer.find("llvmpipe") == std::string::npos;
  }
  /// Starts a timed region (one at a time, not nested; ValueError if one is open).
  void begin_timer();
  /// Ends the region started by begin_timer(); read the result later with TimerResult::ns().
  TimerResult end_timer();
  /// Times every draw() while enabled (adds a query or two glFinish per draw).
  void set_profiling(bool enabled);
  bool profiling() const { return profiling_; }
  /// Milliseconds of the most recent draw() or dispatch() made with profiling on (waits for the GPU result); NaN if
  /// there is none or the measurement was disjoint.
  double last_draw_ms();

 private:
  Device() = default;
  void probe_caps();
  void probe_compute_caps();
  void require_compute(std::string_view what) const;
  void check_gl(const char* step, std::string_view kernel) const;
  /// Shared body of the draw() overloads (validation included); check_declared_outputs: compare
  /// outputs.size() with program.fragment_outputs() (the multiple-output overloads only); viewport_width > 0: the
  /// union-domain draw's viewport (outputs' allocations must cover it), 0: the first output's layout size
  /// (outputs must share it).
  void draw_impl(const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
                 llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name, bool check_declared_outputs,
                 int64_t viewport_width, int64_t viewport_height);
  /// draw_impl's steps: the outputs' count, sizes, distinctness and declared locations; each input texture
  /// matched to a sampler location of the program (every sampler bound, no feedback loop, within the texture
  /// units); the output framebuffer bound (a texture's own for one output, a cached MRT framebuffer for several).
  struct SamplerBinding {
    int location;
    const Texture* tex;
  };
  void validate_draw_outputs(const Program& program, llvm::ArrayRef<Texture*> outputs, const std::string& where,
                             bool check_declared_outputs, int64_t viewport_width, int64_t viewport_height) const;
  std::vector<SamplerBinding> resolve_sampler_bindings(
      const Program& program, llvm::ArrayRef<std::pair<std::string, const Texture*>> inputs,
      llvm::ArrayRef<Texture*> outputs, const std::string& where) const;
  void bind_draw_framebuffer(llvm::ArrayRef<Texture*> outputs, const std::string& kernel_name,
                             const std::string& where);

  std::shared_ptr<detail::Context> ctx_;
  Caps caps_;
  int64_t max_width_ = 0;
  unsigned vao_ = 0;
  bool profiling_ = false;
  bool timer_open_ = false;
  bool timer_open_gpu_ = false;
  unsigned open_query_ = 0;
  int64_t timer_start_ns_ = 0;
  TimerResult last_draw_;
  std::vector<float> staging_;  // upload/download buffer (padded_floats), reused
  unsigned upload_pbo_ = 0;     // GL_PIXEL_UNPACK_BUFFER of large uploads (created by the first), orphaned per upload
};

}  // namespace sg::gles
