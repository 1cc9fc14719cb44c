# The CTest docs_doxygen (issue 26, part 6: "Doxygen builds with zero
# warnings"): runs DOXYGEN on DOXYFILE and fails if it says anything, in
# its warnings log (WARN_LOGFILE, given as LOG) or on its own output (a
# configuration warning goes there), printing what it said.
#   cmake -DDOXYGEN=... -DDOXYFILE=... -DLOG=... -P doxygen_check.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var IN ITEMS DOXYGEN DOXYFILE LOG)
  if(NOT ${var})
    message(FATAL_ERROR "doxygen_check.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE "${LOG}")
string(TIMESTAMP start "%s")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(log "")
if(EXISTS "${LOG}")
  file(READ "${LOG}" log)
endif()
string(STRIP "${out}" out)
if(out)
  string(APPEND out "\n")
endif()
string(STRIP "${log}" log)
if(NOT result EQUAL 0 OR out OR log)
  string(REGEX MATCHALL "[^\n]*warning:[^\n]*" warnings "${log}")
  list(LENGTH warnings count)
  message(FATAL_ERROR "doxygen (exit ${result}) warned ${count} times; fix the comments (see docs/Doxyfile.in):\n"
                      "${out}${log}")
endif()
message(STATUS "doxygen: no warnings (${seconds} s)")
