# Runs `ibdt-bench vector --quick --json` and checks that the JSON parses, that
# every ibdt row and (when ibdt-bench was built with them) every Open MPI and
# MPICH row has a positive latency and bandwidth at each quick size, and that
# the targets table was computed (a smoke test, not a speed test).
# -DBENCH=<ibdt-bench> [-DEXPECT_OPENMPI=ON] [-DEXPECT_MPICH=ON]
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_bench_json.cmake)
ibdt_run_bench_json(vector --quick)
set(count ${rows})

set(expected Generic BC-SPUP RWG-UP P-RRS Multi-W auto Contig Manual)
foreach(library OPENMPI MPICH)
  if(EXPECT_${library})
    set(name "Open MPI")
    if(library STREQUAL "MPICH")
      set(name "MPICH")
    endif()
    list(APPEND expected "${name}" "${name} contig")
  endif()
endforeach()

# Every expected row at x = 1, 16, 256, 2048 (the --quick sizes).
math(EXPR last "${count} - 1")
foreach(row IN LISTS expected)
  foreach(x 1 16 256 2048)
    set(found OFF)
    foreach(i RANGE ${last})
      string(JSON name GET "${out}" rows ${i} row)
      string(JSON rowX GET "${out}" rows ${i} x)
      if(name STREQUAL row AND rowX EQUAL x)
        set(found ON)
        foreach(key "latency us" "MB/s")
          string(JSON value GET "${out}" rows ${i} "${key}")
          if(NOT value GREATER 0)
            message(FATAL_ERROR "row '${row}' x=${x}: '${key}' is ${value}")
          endif()
        endforeach()
      endif()
    endforeach()
    if(NOT found)
      string(REPLACE " contig" "" library "${row}")  # MPI rows: the library's note says why
      string(JSON why ERROR_VARIABLE noNote GET "${out}" "${library}")
      message(FATAL_ERROR "no row '${row}' at x=${x} (note: ${why})\n${err}")
    endif()
  endforeach()
endforeach()

string(JSON judged ERROR_VARIABLE noTargets LENGTH "${out}" targets)
if(noTargets OR NOT judged EQUAL 4)
  message(FATAL_ERROR "expected the targets for the 4 quick sizes: ${noTargets}")
endif()
string(JSON summary GET "${out}" "targets summary")
message(STATUS "ibdt-bench vector: ${count} rows; ${summary}")
