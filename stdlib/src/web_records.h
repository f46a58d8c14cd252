// The records both plans of a bundle program write alike (bundle.json `programs.NAME` for webgl2, web_bundle.cpp,
// and `programs.NAME.webgpu`, web_webgpu.cpp; docs/BUNDLE.md): a value's identity and storage kind, a kernel's
// graph nodes, and the program's interface (inputs, outputs, updates). Each plan adds its own storage fields (the
// webgl2 texture layout and planes; the webgpu buffer bytes) to these. Internal to sg_stdlib.
#pragma once

#include <nlohmann/json.hpp>

#include "sg/web_export.h"

namespace sg::web::records {

/// "input" | "persistent" | "constant" | "temp".
const char* kind_name(ValueKind k);

/// A node's shape as a JSON array of extents.
nlohmann::json shape_json(const Node& n);

/// A value's fields common to both plans: id, name, kind, op, node, shape, dtype, source (when known), tensor (the
/// leaf name of inputs and persistent values), and for temporaries update_of (the persistent value whose back
/// storage it lives in) or buffer (its pooled buffer in the memory plan).
nlohmann::json value(const Plan& plan, const Value& v);

/// A kernel's graph nodes in order: node index, op label, shape, user source line ("" when unknown).
nlohmann::json kernel_nodes(const Plan& plan, const Kernel& k);

/// The program's interface: {"inputs", "outputs", "updates"} (inputs and outputs with value id, shape, dtype;
/// inputs read as class indices by one_hot/cross_entropy also carry "classes", checked by runtime/web/feeds.js).
nlohmann::json program_interface(const Plan& plan);

}  // namespace sg::web::records
