# Configures memplan with only the features named (comma-separated: milp,
# cuda; none: the core and io) and every program off (no tests, examples,
# benchmarks or Python), and installs it without building anything first:
# what the vcpkg port and a package recipe do.
# cmake -DSOURCE=... -DBUILD=... -DPREFIX=... -DGENERATOR=... -DFEATURES=milp -P install_features.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${BUILD}" "${PREFIX}")
string(REPLACE "," ";" features "${FEATURES}")
set(options)
foreach(feature IN ITEMS milp cuda)
  string(TOUPPER "${feature}" name)
  if(feature IN_LIST features)
    list(APPEND options "-DMEMPLAN_ENABLE_${name}=ON")
  else()
    list(APPEND options "-DMEMPLAN_ENABLE_${name}=OFF")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BUILD}" -G "${GENERATOR}" ${options}
                        -DMEMPLAN_BUILD_TESTS=OFF -DMEMPLAN_BUILD_EXAMPLES=OFF -DMEMPLAN_BUILD_BENCHMARKS=OFF
                        -DMEMPLAN_BUILD_PYTHON=OFF -DMEMPLAN_INSTALL=ON
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}" OUTPUT_QUIET
                COMMAND_ERROR_IS_FATAL ANY)
foreach(feature IN ITEMS milp cuda)
  string(SUBSTRING "${feature}" 0 1 first)
  string(TOUPPER "${first}" first)
  string(SUBSTRING "${feature}" 1 -1 rest)
  file(GLOB found "${PREFIX}/lib*/cmake/memplan/memplan${first}${rest}Targets.cmake")
  if(feature IN_LIST features AND NOT found)
    message(FATAL_ERROR "installed with ${feature}, yet its targets are not there")
  elseif(NOT feature IN_LIST features AND found)
    message(FATAL_ERROR "installed without ${feature}, yet ${found} is there")
  endif()
endforeach()
message(STATUS "memplan installed after configure alone, features '${FEATURES}', into ${PREFIX}")
