# Install rules and the CMake package: after `cmake --install build --prefix P`, a project outside this tree writes
#   find_package(shadergrad CONFIG REQUIRED)            # with -DCMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE shadergrad::shadergrad)
# and gets every shadergrad library, its headers and its third-party dependencies (found again by
# shadergrad-config.cmake with find_dependency). A pkg-config file (lib/pkgconfig/shadergrad.pc) is written too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The one target users link: every library, dependencies in order.
# (The CLI executable owns the target name `shadergrad`; the library is sg_all, exported as shadergrad::shadergrad.)
add_library(sg_all INTERFACE)
target_link_libraries(sg_all INTERFACE sg_stdlib)
target_compile_features(sg_all INTERFACE cxx_std_20)  # the headers need C++20 (std::source_location, concepts)
set_target_properties(sg_all PROPERTIES EXPORT_NAME shadergrad)
add_library(shadergrad::shadergrad ALIAS sg_all)

set(SG_EXPORTED_TARGETS sg_all sg_stdlib sg_runtime sg_codegen sg_autodiff sg_dsl sg_llvm sg_warnings)
install(TARGETS ${SG_EXPORTED_TARGETS} EXPORT shadergradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(dir dsl autodiff codegen runtime stdlib)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/include/sg DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(TARGETS shadergrad RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})  # the CLI

# The build tree is RelWithDebInfo (debuggers and sanitizers want the DWARF); the installed archives and CLI are not:
# with it, the install took 333 MB and the README's program linked against it 67 MB. SG_INSTALL_DEBUG_INFO=ON keeps it.
option(SG_INSTALL_DEBUG_INFO "keep DWARF debug info in the installed libraries and CLI" OFF)
if(NOT SG_INSTALL_DEBUG_INFO AND CMAKE_OBJCOPY)
  set(sg_installed_binaries "")
  foreach(lib sg_stdlib sg_runtime sg_codegen sg_autodiff sg_dsl)
    list(APPEND sg_installed_binaries "${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${lib}>")
  endforeach()
  list(APPEND sg_installed_binaries "${CMAKE_INSTALL_BINDIR}/$<TARGET_FILE_NAME:shadergrad>")
  install(CODE "
    foreach(f IN ITEMS ${sg_installed_binaries})
      set(path \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${f}\")
      execute_process(COMMAND \"${CMAKE_OBJCOPY}\" --strip-debug \"\${path}\" RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR \"objcopy --strip-debug \${path} failed (\${rc})\")
      endif()
    endforeach()")
endif()

set(SG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/shadergrad)
install(EXPORT shadergradTargets NAMESPACE shadergrad:: DESTINATION ${SG_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shadergrad-config.cmake.in
                              ${PROJECT_BINARY_DIR}/shadergrad-config.cmake INSTALL_DESTINATION ${SG_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shadergrad-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shadergrad-config.cmake ${PROJECT_BINARY_DIR}/shadergrad-config-version.cmake
        DESTINATION ${SG_CMAKE_DIR})

# pkg-config: our static libraries in link order, then every library they link, walked from the targets' link
# interfaces at generate time (glslang and SPIRV-Cross are static archives whose own dependencies must be listed).
include(${PROJECT_SOURCE_DIR}/cmake/PkgConfigLibs.cmake)
sg_link_closure(SG_PC_LIBS sg_stdlib)
set(SG_PC_LIBS_PRIVATE "")
foreach(lib IN LISTS SG_PC_LIBS)
  string(APPEND SG_PC_LIBS_PRIVATE " ${lib}")
endforeach()
# the .pc finds its prefix from where it is installed (${pcfiledir}), so `cmake --install --prefix P` needs no reconfigure
file(RELATIVE_PATH SG_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" SG_PC_TO_PREFIX "${SG_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/shadergrad.pc.in ${PROJECT_BINARY_DIR}/shadergrad.pc.in @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/shadergrad.pc INPUT ${PROJECT_BINARY_DIR}/shadergrad.pc.in)
install(FILES ${PROJECT_BINARY_DIR}/shadergrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
