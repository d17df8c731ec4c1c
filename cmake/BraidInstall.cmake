#===- cmake/BraidInstall.cmake - cmake --install and find_package(Braid) ---===#
#
# Installs headers (sources and generated), libraries, tools and a
# BraidConfig.cmake exporting Braid:: targets. Included last from the top
# level, once every library exists.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Headers: include/braid, include/braid-c, and the generated .inc files.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/braid"
                  "${PROJECT_SOURCE_DIR}/include/braid-c"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td" PATTERN "*.def")
install(DIRECTORY "${PROJECT_BINARY_DIR}/include/braid"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  FILES_MATCHING PATTERN "*.h" PATTERN "*.inc"
  PATTERN "CMakeFiles" EXCLUDE)

# Libraries. add_mlir_library installs each one already (into MLIR's export
# set, which nobody installs); listing them here puts them in Braid's.
get_property(braid_libraries GLOBAL PROPERTY MLIR_EXPORTS)
list(FILTER braid_libraries INCLUDE REGEX "^Braid")
# The options model is plain C++ (no add_mlir_library), so it is not among
# MLIR's exports; the libraries above link it.
list(APPEND braid_libraries BraidOptions)

# Braid::Braid: every library plus Braid's include directory.
add_library(BraidAll INTERFACE)
set_target_properties(BraidAll PROPERTIES EXPORT_NAME Braid)
# Like the tools: libMLIR.so first, so that MLIR's archives the libraries
# name contribute nothing and the program holds one copy of MLIR.
if(MLIR_LINK_MLIR_DYLIB)
  target_link_libraries(BraidAll INTERFACE MLIR)
endif()
target_link_libraries(BraidAll INTERFACE ${braid_libraries})
target_include_directories(BraidAll INTERFACE
  "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
  "$<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>"
  "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")

install(TARGETS ${braid_libraries} BraidAll
  EXPORT BraidTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")

# Tools find Braid's libraries in ../lib and LLVM's where Debian put them.
set(braid_tools braid-opt braid-compile braid-lsp-server)
foreach(tool ${braid_tools} BraidCAPI)
  if(TARGET ${tool})
    set_property(TARGET ${tool} APPEND PROPERTY INSTALL_RPATH
      "${LLVM_LIBRARY_DIR}")
  endif()
endforeach()
install(TARGETS ${braid_tools} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")

if(TARGET BraidCAPI)
  target_include_directories(BraidCAPI INTERFACE
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
endif()

set(BRAID_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/braid")
install(EXPORT BraidTargets
  NAMESPACE Braid::
  DESTINATION "${BRAID_CMAKE_DIR}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/BraidConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/lib/cmake/braid/BraidConfig.cmake"
  INSTALL_DESTINATION "${BRAID_CMAKE_DIR}"
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR
            CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/lib/cmake/braid/BraidConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/lib/cmake/braid/BraidConfig.cmake"
  "${PROJECT_BINARY_DIR}/lib/cmake/braid/BraidConfigVersion.cmake"
  DESTINATION "${BRAID_CMAKE_DIR}")
