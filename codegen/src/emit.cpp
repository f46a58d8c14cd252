// emit_glsl450: the fragment stage's emitter (emit_fragment.cpp). Compute kernels come from the buffer-storage
// emitter, emit_compute_kernel (sg/compute_kernel.h, emit_compute.cpp), over a plan made for a compute target.
#include "sg/emit.h"

#include <unordered_set>

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

namespace {

/// `src` without its `//` comments (GLSL and WGSL have no string literals) and without the blank lines left.
std::string strip_comments(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  size_t pos = 0;
  while (pos < src.size()) {
    size_t end = src.find('\n', pos);
    if (end == std::string::npos) end = src.size();
    size_t cut = src.find("//", pos);
    if (cut == std::string::npos || cut > end) cut = end;
    while (cut > pos && (src[cut - 1] == ' ' || src[cut - 1] == '\t')) --cut;
    if (cut > pos) out.append(src, pos, cut - pos).push_back('\n');
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::string kernel_code_key(Plan& plan, const Kernel& k, const std::function<std::string()>& emit) {
  struct Renamed {
    Plan& plan;
    std::vector<std::pair<int, std::string>> saved;  // value id, its own name
    ~Renamed() {
      for (auto& [id, name] : saved) plan.values[id].name = std::move(name);
    }
  } renamed{plan, {}};
  std::unordered_set<int> seen;
  auto rename = [&](int id) {
    if (!seen.insert(id).second) return;
    std::string canonical = fmt::format("sgk{}", renamed.saved.size());
    renamed.saved.emplace_back(id, std::exchange(plan.values[id].name, std::move(canonical)));
  };
  for (int id : k.inputs) rename(id);
  for (int id : k.outputs) rename(id);
  return strip_comments(emit());
}

}  // namespace sg
