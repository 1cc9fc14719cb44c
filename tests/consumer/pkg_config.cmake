# The installed pkg-config file: its version is the project's, and the
# consumer builds with nothing but its flags and runs.
# cmake -DPREFIX=... -DCXX=... -DSOURCE=test_package.cpp -DOUT=... -DVERSION=x.y.z -P pkg_config.cmake
find_program(pkg_config NAMES pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/share/pkgconfig")
execute_process(COMMAND "${pkg_config}" --modversion memplan OUTPUT_VARIABLE version
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
if(NOT version STREQUAL VERSION)
  message(FATAL_ERROR "pkg-config says memplan ${version}, the project is ${VERSION}")
endif()
execute_process(COMMAND "${pkg_config}" --cflags --libs memplan OUTPUT_VARIABLE flags
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
separate_arguments(flags UNIX_COMMAND "${flags}")
execute_process(COMMAND "${CXX}" ${flags} "${SOURCE}" -o "${OUT}" ${flags} RESULT_VARIABLE built
                ERROR_VARIABLE errors)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "the consumer does not build with `pkg-config --cflags --libs memplan` (${flags}):\n${errors}")
endif()
execute_process(COMMAND "${OUT}" RESULT_VARIABLE ran)
if(NOT ran EQUAL 0)
  message(FATAL_ERROR "the consumer built from pkg-config's flags exits ${ran}")
endif()
# memplan-io adds nlohmann_json to the core's flags.
execute_process(COMMAND "${pkg_config}" --cflags memplan-io OUTPUT_VARIABLE io_flags
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
if(NOT io_flags MATCHES "-std=c[+][+]20")
  message(FATAL_ERROR "pkg-config --cflags memplan-io gives '${io_flags}', without the core's")
endif()
message(STATUS "memplan ${version} from pkg-config: flags ${flags}")
