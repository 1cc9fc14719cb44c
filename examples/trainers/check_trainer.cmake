cmake_policy(SET CMP0057 NEW)  # IN_LIST in script mode
# Runs one trainer under every planner at --budget 50 for ITERATIONS
# iterations (issue 27): the planners in FEASIBLE must exit 0 (loss and weights equal
# to the unplanned run's bit for bit, the arena within the budget), the
# others 2 (no plan fits, with the planner's reason on stderr). FEASIBLE
# "ANY": each planner may find a plan (then it must run as above) or not.
#   cmake -DTRAINER=path -DPLANNERS="a;b" -DFEASIBLE="a" -DITERATIONS=20 -P check_trainer.cmake
foreach(planner IN LISTS PLANNERS)
  execute_process(COMMAND "${TRAINER}" --planner ${planner} --budget 50 --iterations ${ITERATIONS}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(FEASIBLE STREQUAL "ANY" AND code EQUAL 2 AND err MATCHES "${planner} cannot meet [0-9]+ bytes: ")
    message(STATUS "${planner}: exit 2, no plan")
    continue()
  endif()
  if(planner IN_LIST FEASIBLE OR FEASIBLE STREQUAL "ANY")
    if(NOT code EQUAL 0 OR NOT out MATCHES "iteration ${ITERATIONS}: .*\\(within\\).*: identical")
      message(FATAL_ERROR "${planner}: exit ${code}, expected 0 (identical, within the budget)\n${out}${err}")
    endif()
  elseif(NOT code EQUAL 2 OR NOT err MATCHES "${planner} cannot meet [0-9]+ bytes: ")
    message(FATAL_ERROR "${planner}: exit ${code}, expected 2 (no plan fits)\n${out}${err}")
  endif()
  string(REGEX MATCH "planned: [^\n]*" summary "${out}")
  message(STATUS "${planner}: exit ${code} ${summary}")
endforeach()
