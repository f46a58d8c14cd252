// sg::Backend over a context shared with every executable it compiles (the gles, gles-compute and vulkan backends):
// an executable keeps the context (device, programs, persistent values) alive after the backend is gone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sg/backend.h"

namespace sg {

/// Context: constructible from BackendOptions, with name(), device(), compile(p) (an Executable holding a
/// shared_ptr to the context: Context derives from std::enable_shared_from_this), read(leaf) and write(leaf, data).
template <class Context>
class SharedContextBackend final : public Backend {
 public:
  explicit SharedContextBackend(const BackendOptions& opt) : ctx_(std::make_shared<Context>(opt)) {}
  std::string name() const override { return ctx_->name(); }
  std::string device() const override { return ctx_->device(); }
  std::unique_ptr<Executable> compile(const Program& p) override { return ctx_->compile(p); }
  std::vector<float> read(const Tensor& leaf) override { return ctx_->read(leaf); }
  void write(const Tensor& leaf, const std::vector<float>& data) override { ctx_->write(leaf, data); }
  Context& context() { return *ctx_; }

 private:
  std::shared_ptr<Context> ctx_;
};

}  // namespace sg
