# Issue 26: only compile.hpp (and the graph headers it needs) reads Boost;
# the problem, plans, the simulator, the validator, the planners and the
# executor are flat arrays and compile without it. Fails naming the first
# Boost header a listed header pulls in (GCC's and Clang's -H).
# cmake -DCXX=... -DSOURCE=<repository> -DOUT=<scratch dir> -P boost_free.cmake
set(headers memplan/problem.hpp memplan/plan.hpp memplan/plan_builder.hpp memplan/sim/simulator.hpp
            memplan/sim/validator.hpp memplan/planners/registry.hpp memplan/runtime/executor.hpp
            memplan/host/device.hpp)
file(MAKE_DIRECTORY "${OUT}")
foreach(header IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${header}" name)
  file(WRITE "${OUT}/${name}.cpp" "#include <${header}>\nint main() {}\n")
  execute_process(COMMAND "${CXX}" -std=c++20 "-I${SOURCE}/include" -fsyntax-only -H "${OUT}/${name}.cpp"
                  RESULT_VARIABLE compiled ERROR_VARIABLE included)
  if(NOT compiled EQUAL 0)
    message(FATAL_ERROR "<${header}> alone does not compile:\n${included}")
  endif()
  string(REGEX MATCH "[^ \n]*/boost/[^ \n]*" boost "${included}")
  if(boost)
    message(FATAL_ERROR "<${header}> includes ${boost}: only memplan/compile.hpp may need Boost")
  endif()
  message(STATUS "<${header}>: no Boost header")
endforeach()
