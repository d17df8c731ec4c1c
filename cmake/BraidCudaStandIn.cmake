#===- cmake/BraidCudaStandIn.cmake - Libraries that stand in for CUDA's ----===#
#
# braid_cuda_stand_in(TARGET SONAME VERSION_NODE EXPORTS OUTPUT_DIR
#                     SOURCES src... [LIBS lib...] [INCLUDES dir...])
#
# Builds a shared library under a CUDA library's soname (libcudart.so.13,
# libcublasLt.so.13, libnccl.so.2) into OUTPUT_DIR, exporting only the
# symbols EXPORTS (a version-script pattern list, e.g. "cuda*; braidEmu*")
# under VERSION_NODE (the real library's symbol version, which references
# from libBraidRuntimeCUDA.so name; "" for NCCL, whose symbols are not
# versioned). Putting OUTPUT_DIR on LD_LIBRARY_PATH makes the real runtime,
# runners and compiled programs load it instead of the toolkit's. Used by
# the emulated device (lib/Emulator).

function(braid_cuda_stand_in target soname node exports output_dir)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  add_library(${target} SHARED ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE
    ${ARG_INCLUDES}
    "${PROJECT_SOURCE_DIR}/lib/Runtime"
    ${CUDAToolkit_INCLUDE_DIRS} "${BRAID_NCCL_INCLUDE_DIR}")
  target_compile_features(${target} PRIVATE cxx_std_17)
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} Threads::Threads)
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}.map")
  file(WRITE "${script}" "${node} { global: ${exports}; local: *; };\n")
  # Only the exported functions are visible; the version node is the real
  # library's.
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    OUTPUT_NAME "${soname}"
    PREFIX ""
    SUFFIX ""
    NO_SONAME ON
    LIBRARY_OUTPUT_DIRECTORY "${output_dir}"
    BUILD_RPATH "\$ORIGIN"
    LINK_DEPENDS "${script}")
  target_link_options(${target} PRIVATE
    "LINKER:-soname,${soname}" "LINKER:--version-script=${script}")
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra)
  endif()
endfunction()
