# switchyard_add_plugin(<name> SOURCES ... [OUTPUT_DIRECTORY dir] [NO_MANIFEST])
#
# Builds a Switchyard backend plugin: a MODULE library `<name>.so` that exports only
# `sy_plugin_entry`, links the ABI headers and nothing of the core, and writes its
# manifest `<name>.json` beside it, generated from the plugin's own declaration by
# `switchyard manifest` so the two cannot drift. Shipped with the installed package
# for third-party plugin authors.
function(switchyard_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "NO_MANIFEST" "OUTPUT_DIRECTORY" "SOURCES")
  if(NOT arg_OUTPUT_DIRECTORY)
    if(DEFINED SWITCHYARD_PLUGIN_OUTPUT_DIR)
      set(arg_OUTPUT_DIRECTORY ${SWITCHYARD_PLUGIN_OUTPUT_DIR})
    else()
      set(arg_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    endif()
  endif()
  add_library(${name} MODULE ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE Switchyard::abi)
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    LIBRARY_OUTPUT_DIRECTORY ${arg_OUTPUT_DIRECTORY}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Unresolved symbols are a build error, not a dlopen surprise.
  target_link_options(${name} PRIVATE -Wl,--no-undefined)
  if(NOT arg_NO_MANIFEST)
    add_custom_command(TARGET ${name} POST_BUILD
      COMMAND Switchyard::switchyard manifest $<TARGET_FILE:${name}>
              --output ${arg_OUTPUT_DIRECTORY}/${name}.json
      COMMENT "manifest for plugin ${name}"
      VERBATIM)
    add_dependencies(${name} Switchyard::switchyard)
  endif()
endfunction()
