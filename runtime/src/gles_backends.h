// Private to the runtime: what the GLES fragment backend's shared helpers need from the GLES compute backend.
#pragma once

#include <optional>

#include "sg/backend.h"
#include "sg/gles_device.h"

namespace sg::detail {

/// The live GL objects of `backend` when it is a gles-compute backend, else nullopt.
std::optional<gles::LiveObjects> gles_compute_live_objects(Backend& backend);

}  // namespace sg::detail
