# memplan: header-only; its own CMake install makes the package (components
# memplan::memplan, memplan::io and, with the features, memplan::milp and
# memplan::cuda). A registry submission takes the sources from a release:
#   vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH REPO memplan/memplan REF "v${VERSION}" SHA512 ...)
# An overlay port (vcpkg install memplan --overlay-ports=packaging/vcpkg/ports)
# builds this checkout.
if(NOT DEFINED SOURCE_PATH)
  get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)
endif()

vcpkg_check_features(OUT_FEATURE_OPTIONS feature_options
  FEATURES
    milp MEMPLAN_ENABLE_MILP
    cuda MEMPLAN_ENABLE_CUDA
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${feature_options}
    -DMEMPLAN_BUILD_TESTS=OFF
    -DMEMPLAN_BUILD_EXAMPLES=OFF
    -DMEMPLAN_BUILD_BENCHMARKS=OFF
    -DMEMPLAN_BUILD_PYTHON=OFF
    -DMEMPLAN_INSTALL=ON
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/memplan)
vcpkg_fixup_pkgconfig()

# Header-only: nothing is built, so the debug tree holds nothing of use.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug" "${CURRENT_PACKAGES_DIR}/lib")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/README.md")
