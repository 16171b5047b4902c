# `ibdt-bench soak` over real processes and the default provider (issue 17,
# docs/security.md "Soak"): SECONDS of random mixing at 4 ranks, then kill
# jobs at 2, 4 and 8 ranks (a random rank SIGKILLed at a random point; two
# ranks at their own points; a rank killed while contexts are created). The
# bench itself exits non-zero on any wrong byte, any error in the mix, and
# any survivor that hangs, times out or reports success; this script also
# checks the JSON it reports.
# -DBENCH=<ibdt-bench> [-DSECONDS=10] [-DJOBS=4]
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_bench_json.cmake)
if(NOT SECONDS)
  set(SECONDS 10)
endif()
if(NOT JOBS)
  set(JOBS 4)
endif()

ibdt_run_bench_json(soak --ranks 4 --seconds ${SECONDS} --bound 20)
string(JSON rounds GET "${out}" rows 0 rounds)
string(JSON bytes GET "${out}" rows 0 "bytes checked")
string(JSON failed GET "${out}" rows 0 "failed ranks")
message(STATUS "soak mix, 4 ranks, ${SECONDS} s: ${rounds} rounds, ${bytes} bytes checked")
if(NOT rounds GREATER 0 OR NOT bytes GREATER 0 OR NOT failed EQUAL 0)
  message(FATAL_ERROR "soak mix: ${rounds} rounds, ${bytes} bytes checked, ${failed} failed ranks:\n${out}")
endif()

# Kill jobs: every survivor of every job must end with an error (the bench
# also fails on a hang, a timeout or a wrong byte).
function(check_kill_jobs label expectedRows)
  ibdt_run_bench_json(soak --kill ${ARGN} --bound 20)
  if(NOT rows EQUAL expectedRows)
    message(FATAL_ERROR "soak --kill ${label}: ${rows} jobs reported, expected ${expectedRows}:\n${out}\n${err}")
  endif()
  math(EXPR last "${rows} - 1")
  foreach(i RANGE ${last})
    string(JSON survivors GET "${out}" rows ${i} survivors)
    string(JSON errors GET "${out}" rows ${i} errors)
    string(JSON failed GET "${out}" rows ${i} "failed ranks")
    if(NOT errors EQUAL survivors OR NOT failed EQUAL 0)
      message(FATAL_ERROR "soak --kill ${label} job ${i}: ${errors} of ${survivors} survivors ended with an error, "
                          "${failed} failed ranks:\n${out}\n${err}")
    endif()
  endforeach()
  string(JSON codes GET "${out}" "survivor errors by code")
  message(STATUS "soak --kill ${label}: ${rows} jobs, survivor errors by code ${codes}")
endfunction()

math(EXPR oneVictimJobs "3 * ${JOBS}")
check_kill_jobs("one victim in the rounds" ${oneVictimJobs} --ranks 2 4 8 --jobs ${JOBS})
check_kill_jobs("two victims in the rounds" 4 --ranks 4 8 --jobs 2 --victims 2)
check_kill_jobs("a victim while contexts are created" 6 --ranks 2 4 8 --jobs 2 --during-create --kill-delay-ms 100)

# Bad input: a rank count outside 2..8 is refused before anything starts.
execute_process(COMMAND ${BENCH} soak --ranks 9 --seconds 1 RESULT_VARIABLE rc OUTPUT_VARIABLE badOut
                ERROR_VARIABLE badErr)
if(rc EQUAL 0 OR NOT "${badOut}${badErr}" MATCHES "--ranks")
  message(FATAL_ERROR "soak --ranks 9 was not refused naming --ranks (exit ${rc}):\n${badOut}${badErr}")
endif()
