# cmake --install: headers, the shared library, a CMake package (ibdt::ibdt)
# and a pkg-config file (ibdt.pc).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ibdt EXPORT ibdtTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ibdt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ibdtTargets NAMESPACE ibdt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibdt)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ibdtConfig.cmake.in
  ${CMAKE_BINARY_DIR}/ibdtConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibdt)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ibdtConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ibdtConfig.cmake ${CMAKE_BINARY_DIR}/ibdtConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibdt)

# The .pc file finds its prefix relative to itself, so the tree can move.
file(RELATIVE_PATH IBDT_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/ibdt.pc.in ${CMAKE_BINARY_DIR}/ibdt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ibdt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
