# Finds every third-party dependency; a missing one names the Debian package to install
# (scripts/setup.sh installs them all).

macro(sg_require found pkg what)
  if(NOT ${found})
    message(FATAL_ERROR "shadergrad: ${what} not found. Install the Debian package '${pkg}' "
                        "(or run: sudo scripts/setup.sh)")
  endif()
endmacro()

find_package(Threads REQUIRED)

find_package(LLVM 14 CONFIG QUIET PATHS /usr/lib/llvm-14/lib/cmake/llvm NO_DEFAULT_PATH)
sg_require(LLVM_FOUND llvm-14-dev "LLVM 14 (ADT/Support)")
llvm_map_components_to_libnames(SG_LLVM_LIBS support)
add_library(sg_llvm INTERFACE)
target_include_directories(sg_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
separate_arguments(SG_LLVM_DEFS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_definitions(sg_llvm INTERFACE ${SG_LLVM_DEFS})
target_link_libraries(sg_llvm INTERFACE ${SG_LLVM_LIBS})

find_package(range-v3 CONFIG QUIET)
sg_require(range-v3_FOUND librange-v3-dev "range-v3")
find_package(fmt CONFIG QUIET)
sg_require(fmt_FOUND libfmt-dev "fmt")
find_package(nlohmann_json CONFIG QUIET)
sg_require(nlohmann_json_FOUND nlohmann-json3-dev "nlohmann-json")
find_package(CLI11 CONFIG QUIET)
sg_require(CLI11_FOUND libcli11-dev "CLI11")
find_package(ZLIB QUIET)
sg_require(ZLIB_FOUND zlib1g-dev "zlib")
find_package(PNG QUIET)
sg_require(PNG_FOUND libpng-dev "libpng")

# SHA-256 of checkpoint data (safetensors.cpp): nettle, linked statically (no runtime library to ship)
find_path(SG_NETTLE_INCLUDE nettle/sha2.h)
find_library(SG_NETTLE_LIB NAMES libnettle.a nettle)
sg_require(SG_NETTLE_LIB nettle-dev "nettle (SHA-256)")
sg_require(SG_NETTLE_INCLUDE nettle-dev "nettle headers")

# glslang: Threads first, then glslang; its SPIRV target links SPIRV-Tools(-opt).
find_package(SPIRV-Tools CONFIG QUIET)
sg_require(SPIRV-Tools_FOUND spirv-tools "SPIRV-Tools")
find_package(SPIRV-Tools-opt CONFIG QUIET)
sg_require(SPIRV-Tools-opt_FOUND spirv-tools "SPIRV-Tools-opt")
find_package(glslang CONFIG QUIET)
sg_require(glslang_FOUND glslang-dev "glslang")
find_package(spirv_cross_core CONFIG QUIET)
sg_require(spirv_cross_core_FOUND libspirv-cross-c-shared-dev "SPIRV-Cross core")
find_package(spirv_cross_glsl CONFIG QUIET)
sg_require(spirv_cross_glsl_FOUND libspirv-cross-c-shared-dev "SPIRV-Cross GLSL")

if(SG_WITH_GLES)
  find_package(OpenGL QUIET COMPONENTS EGL)
  sg_require(OpenGL_EGL_FOUND libegl-dev "EGL")
  find_library(SG_GLESV2_LIB GLESv2)
  sg_require(SG_GLESV2_LIB libgles-dev "GLESv2")
  find_path(SG_GLES3_INCLUDE GLES3/gl3.h)
  sg_require(SG_GLES3_INCLUDE libgles-dev "GLES3 headers")
endif()

# Vulkan: the loader and headers (the Vulkan backend; lavapipe from mesa-vulkan-drivers runs it on CPUs).
find_package(Vulkan QUIET)
sg_require(Vulkan_FOUND libvulkan-dev "Vulkan loader and headers")

if(SG_BUILD_TESTS)
  find_package(Catch2 2 CONFIG QUIET)
  sg_require(Catch2_FOUND catch2 "Catch2 2.x")
endif()
