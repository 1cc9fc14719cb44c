# Runs `memplan plan ... --json` and `memplan execute ... --json` on the same
# SOURCE, budget and planner and checks the executor's figures against the
# simulator's: the same memory layout (arena_bytes), a live peak no higher
# (the executor counts a buffer live until its release is issued, the
# simulator until its holders end), a high water inside the arena, the arena
# inside the budget, nothing compacted.
#   cmake -DMEMPLAN=path -DARGS=a|b|c -P execute_matches_plan.cmake
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${MEMPLAN}" plan ${args} --json RESULT_VARIABLE plan_status OUTPUT_VARIABLE plan_out
                ERROR_VARIABLE plan_err)
execute_process(COMMAND "${MEMPLAN}" execute ${args} --json RESULT_VARIABLE run_status OUTPUT_VARIABLE run_out
                ERROR_VARIABLE run_err)
if(NOT plan_status EQUAL 0 OR NOT run_status EQUAL 0)
  message(FATAL_ERROR "exit statuses ${plan_status} (plan), ${run_status} (execute)\n${plan_out}${plan_err}\n${run_out}${run_err}")
endif()
string(JSON plan_arena GET "${plan_out}" arena_bytes)
# An online policy's arena is its allocator's: the segments' high-water mark.
string(JSON allocator_arena ERROR_VARIABLE no_allocator GET "${plan_out}" allocator_arena_bytes)
if(NOT no_allocator)
  set(plan_arena "${allocator_arena}")
endif()
string(JSON plan_live GET "${plan_out}" peak_live_bytes)
string(JSON budget GET "${plan_out}" budget_bytes)
foreach(field ok arena_bytes peak_live_bytes arena_high_water_bytes compactions compacted_bytes budget_bytes)
  string(JSON ${field} GET "${run_out}" ${field})
endforeach()
set(failures "")
if(NOT ok)
  string(APPEND failures "execute says not ok\n")
endif()
if(NOT arena_bytes EQUAL plan_arena)
  string(APPEND failures "arena_bytes ${arena_bytes}, plan's ${plan_arena}\n")
endif()
if(peak_live_bytes GREATER plan_live)
  string(APPEND failures "peak_live_bytes ${peak_live_bytes} above the plan's ${plan_live}\n")
endif()
if(arena_high_water_bytes GREATER arena_bytes OR arena_bytes GREATER budget OR NOT budget_bytes EQUAL budget)
  string(APPEND failures "high water ${arena_high_water_bytes}, arena ${arena_bytes}, budget ${budget_bytes} (plan's ${budget})\n")
endif()
if(NOT compactions EQUAL 0 OR NOT compacted_bytes EQUAL 0)
  string(APPEND failures "${compactions} compactions moved ${compacted_bytes} bytes\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}plan:\n${plan_out}\nexecute:\n${run_out}")
endif()
message(STATUS "arena ${arena_bytes} (plan's ${plan_arena}), live peak ${peak_live_bytes} (plan's ${plan_live}), budget ${budget}")
