// shadergrad — the one owner of a device-API object (a GL name, a Vulkan handle) that the GLES and Vulkan handle
// classes hold (sg/gles_device.h, sg/vulkan_device.h).
#pragma once

#include <memory>
#include <utility>

namespace sg::detail {

/// An object of a device API owned together with the context that made it (the context outlives it: the handle
/// holds a shared_ptr). Move-only; reset, destruction and move-assignment onto it destroy the object and take it off
/// the context's live-object counters. `Traits` says how:
///   using Context = ...;   the context type (may be incomplete where the handle is only held)
///   using Handle = ...;    GLuint, VkPipeline, ... (Handle{} is the null handle)
///   static void count(Context&);                  one more live object of this kind (or nothing: uncounted kinds)
///   static void destroy(Context&, Handle) noexcept;   deletes it and counts it off
template <class Traits>
class UniqueHandle {
 public:
  using Context = typename Traits::Context;
  using Handle = typename Traits::Handle;

  UniqueHandle() = default;
  /// Owns `h` (made in `ctx`) from now on and counts it; a null `h` is not owned (and not counted).
  static UniqueHandle adopt(std::shared_ptr<Context> ctx, Handle h) {
    UniqueHandle u;
    if (h == Handle{}) return u;
    Traits::count(*ctx);
    u.ctx_ = std::move(ctx);
    u.h_ = h;
    return u;
  }
  UniqueHandle(UniqueHandle&& o) noexcept : ctx_(std::move(o.ctx_)), h_(std::exchange(o.h_, Handle{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::move(o.ctx_);
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  /// Destroys the object (if any) and forgets the context.
  void reset() noexcept {
    if (h_ != Handle{} && ctx_) Traits::destroy(*ctx_, h_);
    h_ = Handle{};
    ctx_.reset();
  }
  Handle get() const { return h_; }
  /// The context it was made in (null when empty).
  const std::shared_ptr<Context>& context() const { return ctx_; }

 private:
  std::shared_ptr<Context> ctx_;
  Handle h_{};
};

}  // namespace sg::detail
