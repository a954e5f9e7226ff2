# `cmake --install BUILD [--prefix DIR]` (docs/install.md): the command, the collector and NCCL
# plugin, the SPANK plugin and batch script, the C API headers and its CMake package, the docs and
# the bash completion. `commprof run` finds the collector as <bin>/../${CMAKE_INSTALL_LIBDIR}.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS commprof_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS commprof LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET commprof_nccl_profiler)
  install(TARGETS commprof_nccl_profiler LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET spank_commprof)
  install(TARGETS spank_commprof LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/slurm)
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/slurm/commprof.sbatch DESTINATION ${CMAKE_INSTALL_DATADIR}/commprof)
install(FILES ${PROJECT_SOURCE_DIR}/include/commprof/commprof.h ${PROJECT_SOURCE_DIR}/include/commprof/event.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/commprof)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/cli/commprof-completion.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME commprof)

set(_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/commprof)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/commprofConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/commprofConfig.cmake INSTALL_DESTINATION ${_config_dir}
                              PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/commprofConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/commprofConfig.cmake ${PROJECT_BINARY_DIR}/commprofConfigVersion.cmake
        DESTINATION ${_config_dir})
