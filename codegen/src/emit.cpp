// emit_glsl450: one emitter per stage (emit_fragment.cpp; emit_compute_legacy.cpp until the buffer-storage compute
// emitter of sg/compute_kernel.h serves every compute caller). The expression printer both share is glsl_expr.h.
#include "sg/emit.h"

#include "emit_stages.h"

namespace sg {

std::string emit_glsl450(const Plan& plan, const Kernel& k, ShaderStage stage) {
  switch (stage) {
    case ShaderStage::Fragment: return emit_fragment(plan, k);
    case ShaderStage::Compute: return emit_compute_legacy(plan, k);
  }
  return emit_fragment(plan, k);
}

}  // namespace sg
