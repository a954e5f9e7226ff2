# Header tiers: what a module lets other modules include.
#
# Each module (core, h5, collector, nccl_hooks, aggregator, analysis, cli) declares once, next to
# its targets, which of its headers are public:
#
#   commprof_module(aggregator TARGETS commprof_aggregator
#     PUBLIC_HEADERS
#       hdf5/hdf5_writer.h
#       server.h)
#
# To make a header public, add one line (its path relative to the module's directory) to
# PUBLIC_HEADERS. A header not listed there is private: nothing to do, every header under the
# module's directory is seen by the module's own sources (a new file is picked up by the next
# build). A public header may include only public headers (its own module's or those of the
# modules it links PUBLIC), or its users will not compile.
#
# How: the source tree is not an include directory of any target (the configure step fails if one
# names it). The headers are symlinked, with their usual spelling (`aggregator/server.h`), into
#   <build>/include_tiers/<module>/public    PUBLIC include directory of TARGETS: users see only these
#   <build>/include_tiers/<module>/private   PRIVATE include directory of TARGETS: every header
# Compilers and clang-tidy resolve the links, so diagnostics and fixes name the files in the tree.
# Unit tests and benchmarks that test internals link commprof_<module>_internals_for_tests, an
# INTERFACE target giving the private tier (include directories only; link the library as well).
# The product's installed API is include/commprof/ (an include directory of commprof_core).
#
#   DIRECTORY  the module's directory, relative to the current source dir (default: it)
#   EXCLUDE    subdirectories that belong to another module (core: h5)
include_guard(GLOBAL)

function(commprof_module name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DIRECTORY" "TARGETS;PUBLIC_HEADERS;EXCLUDE")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_TARGETS)
    message(FATAL_ERROR "commprof_module(${name}): usage: commprof_module(<name> TARGETS <t>... "
                        "[DIRECTORY <dir>] [EXCLUDE <subdir>...] [PUBLIC_HEADERS <header>...]) "
                        "(unparsed: ${arg_UNPARSED_ARGUMENTS})")
  endif()
  if(NOT arg_DIRECTORY)
    set(arg_DIRECTORY .)
  endif()
  get_filename_component(dir "${arg_DIRECTORY}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  file(RELATIVE_PATH prefix "${PROJECT_SOURCE_DIR}" "${dir}")
  set(root "${PROJECT_BINARY_DIR}/include_tiers/${name}")
  file(REMOVE_RECURSE "${root}")
  file(MAKE_DIRECTORY "${root}/public" "${root}/private")

  file(GLOB_RECURSE headers RELATIVE "${dir}" CONFIGURE_DEPENDS "${dir}/*.h" "${dir}/*.hpp" "${dir}/*.inc")
  foreach(sub IN LISTS arg_EXCLUDE)
    list(FILTER headers EXCLUDE REGEX "^${sub}/")
  endforeach()
  foreach(h IN LISTS headers)
    get_filename_component(parent "${root}/private/${prefix}/${h}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(CREATE_LINK "${dir}/${h}" "${root}/private/${prefix}/${h}" SYMBOLIC)
  endforeach()
  foreach(h IN LISTS arg_PUBLIC_HEADERS)
    if(NOT h IN_LIST headers)
      message(FATAL_ERROR "commprof_module(${name}): public header ${prefix}/${h} is not a header of the module")
    endif()
    get_filename_component(parent "${root}/public/${prefix}/${h}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(CREATE_LINK "${dir}/${h}" "${root}/public/${prefix}/${h}" SYMBOLIC)
  endforeach()

  foreach(t IN LISTS arg_TARGETS)
    target_include_directories(${t} PRIVATE "${root}/private" PUBLIC "$<BUILD_INTERFACE:${root}/public>")
  endforeach()
  set(internals commprof_${name}_internals_for_tests)
  add_library(${internals} INTERFACE)
  target_include_directories(${internals} INTERFACE "${root}/private")
  set_property(GLOBAL APPEND PROPERTY COMMPROF_MODULES ${name})
endfunction()

# Fails the configure step when a target of the project has the source root itself as an include
# directory (that would let it include any module's private headers). Called once, at the end of
# the top-level CMakeLists.txt.
function(commprof_check_include_roots)
  set(dirs "${PROJECT_SOURCE_DIR}")
  set(offenders "")
  while(dirs)
    list(POP_FRONT dirs d)
    get_property(subdirs DIRECTORY "${d}" PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY "${d}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      set(props INTERFACE_INCLUDE_DIRECTORIES)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        list(APPEND props INCLUDE_DIRECTORIES)
      endif()
      foreach(p IN LISTS props)
        get_target_property(incs ${t} ${p})
        if(incs)
          foreach(i IN LISTS incs)
            string(REGEX REPLACE "^\\$<BUILD_INTERFACE:(.*)>$" "\\1" i "${i}")
            string(REGEX REPLACE "/+$" "" i "${i}")
            if(i STREQUAL PROJECT_SOURCE_DIR)
              list(APPEND offenders "${t}")
            endif()
          endforeach()
        endif()
      endforeach()
    endforeach()
  endwhile()
  if(offenders)
    list(REMOVE_DUPLICATES offenders)
    message(FATAL_ERROR "The source root is an include directory of ${offenders}: link the module's library "
                        "(public headers) or commprof_<module>_internals_for_tests (tests) instead "
                        "(cmake/CommprofModule.cmake)")
  endif()
endfunction()
