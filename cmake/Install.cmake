# Relocatable install: bin/switchyard, lib/libswitchyard.so (the host C API, include/switchyard/
# host.h; it finds lib/switchyard/plugins beside itself), lib/switchyard/plugins/ (and
# reference/), include/switchyard/, share/switchyard/examples/embed_c,
# and a CMake package so plugin authors can `find_package(Switchyard)` and get
# Switchyard::abi (the C headers), Switchyard::plugin_kit (the C++ edge and the operator
# contract library) and switchyard_add_plugin().
include(CMakePackageConfigHelpers)

install(TARGETS switchyard EXPORT SwitchyardTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS switchyard_abi switchyard_op_contract switchyard_plugin_kit
        EXPORT SwitchyardTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY abi/include/switchyard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS switchyard_host EXPORT SwitchyardTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/switchyard/host.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard)
install(FILES examples/embed_c/main.c
        DESTINATION ${CMAKE_INSTALL_DATADIR}/switchyard/examples/embed_c)
# The plugin kit's C++ headers: #include "cxx_edge/cxx_edge.hpp" through Switchyard::plugin_kit.
install(DIRECTORY plugins/plugin_kit/cxx_edge
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/switchyard/plugin_kit)
install(DIRECTORY ${SWITCHYARD_PLUGIN_OUTPUT_DIR}/ DESTINATION ${SWITCHYARD_PLUGIN_SUBDIR}
        FILES_MATCHING PATTERN "*.so" PATTERN "*.json")
# The reference plugin ships beside the plugins, off their search path (plugins/reference/).
install(DIRECTORY ${PROJECT_BINARY_DIR}/lib/switchyard/reference/
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/switchyard/reference
        FILES_MATCHING PATTERN "*.so" PATTERN "*.json")

set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Switchyard)
install(EXPORT SwitchyardTargets NAMESPACE Switchyard:: DESTINATION ${cmake_dir})
configure_package_config_file(cmake/SwitchyardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake INSTALL_DESTINATION ${cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SwitchyardConfig.cmake
              ${PROJECT_BINARY_DIR}/SwitchyardConfigVersion.cmake
              cmake/SwitchyardPlugin.cmake
        DESTINATION ${cmake_dir})
