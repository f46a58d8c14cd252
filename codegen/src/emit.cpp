// emit_glsl450: the fragment stage's emitter (emit_fragment.cpp). Compute kernels come from the buffer-storage
// emitter, emit_compute_kernel (sg/compute_kernel.h, emit_compute.cpp), over a plan made for a compute target.
#include "sg/emit.h"

#include <fmt/format.h>

#include "emit_stages.h"
#include "sg/error.h"

namespace sg {

std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage) {
  switch (stage) {
    case ShaderStage::Fragment: return emit_fragment(plan, k);
    case ShaderStage::Compute: break;
  }
  throw UnsupportedError(fmt::format("kernel {}: emit_glsl450 writes fragment shaders; compute kernels come from "
                                     "emit_compute_kernel (sg/compute_kernel.h) over a plan scheduled for a compute "
                                     "target", k.name));
}

}  // namespace sg
