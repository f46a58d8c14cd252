// Sanitizer builds only (-DSG_SANITIZE=ON links this into every test executable, the CLI and the examples; see
// docs/RELIABILITY.md "Sanitizers"). Mesa's llvmpipe (EGL/GLES) and lavapipe (Vulkan) and the Vulkan validation
// layer are not instrumented and keep a few small allocations until process exit; their loaders dlclose them
// (eglTerminate, vkDestroyInstance) before LeakSanitizer runs at exit, so LSan reports those allocations from an
// "<unknown module>" that no suppression can name. Opening the driver libraries once here with RTLD_NODELETE
// keeps them mapped to the end: LSan then attributes such a leak to the driver library, and
// tests/sanitizer/lsan.supp suppresses exactly those (allocations whose caller is inside a driver library).
// A library that is not installed is skipped. Not part of any normal build.
#include <dlfcn.h>

#include <initializer_list>

namespace {

struct PinDrivers {
  PinDrivers() {
    for (const char* lib : {
             "/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so",  // llvmpipe behind libEGL_mesa (Mesa's DRI loader)
             "libEGL_mesa.so.0",                             // glvnd's Mesa vendor library
             "libvulkan_lvp.so",                             // lavapipe, the Vulkan ICD of the CPU tests
             "libVkLayer_khronos_validation.so",             // the validation layer the Vulkan tests enable
         })
      dlopen(lib, RTLD_NOW | RTLD_NODELETE);  // the handle is never closed: that is the point
  }
} pin_drivers;

}  // namespace
