# `cmake --install` puts the libraries, their headers under include/spmdsim/ and an export set, so that
# a user's project can say find_package(spmdsim) and link spmdsim::shardmap (see tests/consumer/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(_spmdsim_libs GLOBAL PROPERTY SPMDSIM_LIBRARIES)
install(TARGETS ${_spmdsim_libs} spmdsim_warnings spmdsim_sanitize EXPORT spmdsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Public headers only: internal/ folders are for their own module (no installed header includes them).
foreach(dir common mesh sim ops cost partition model shardmap workloads scenario testing)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spmdsim/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "internal" EXCLUDE)
endforeach()
install(EXPORT spmdsimTargets NAMESPACE spmdsim::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spmdsim)
configure_package_config_file(cmake/spmdsimConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/spmdsimConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spmdsim)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/spmdsimConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/spmdsimConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/spmdsimConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spmdsim)
