# `ibdt-bench connect --idle-peers` (issue 16, docs/many-ranks.md): jobs of
# 2, 3 and 6 ranks alive at once take turns at the ping-pong, then each
# times an idle progress and an all-to-all whose every byte the bench checks
# itself (it exits non-zero otherwise). This script checks that every job
# size has its row in each of the three reports, with a positive time and a
# ratio to the first size, so a job lost on the way fails the test.
# -DBENCH=<ibdt-bench>
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_bench_json.cmake)
set(sizes 2 3 6)
ibdt_run_bench_json_out(${CMAKE_CURRENT_BINARY_DIR}/idle-peers-smoke idle-peers-ping-pong
                        --reps 3 --warmup 1 connect --provider shm --idle-peers 2,3,6)

foreach(stem idle-peers-ping-pong idle-peers-progress idle-peers-memory)
  file(READ ${CMAKE_CURRENT_BINARY_DIR}/idle-peers-smoke/${stem}.json report)
  string(JSON count LENGTH "${report}" rows)
  if(NOT count EQUAL 3)
    message(FATAL_ERROR "${stem}: ${count} rows, expected one per job size (${sizes}):\n${report}")
  endif()
  set(i 0)
  foreach(ranks ${sizes})
    string(JSON rowRanks GET "${report}" rows ${i} ranks)
    if(NOT rowRanks EQUAL ranks)
      message(FATAL_ERROR "${stem}: row ${i} is ${rowRanks} ranks, expected ${ranks}:\n${report}")
    endif()
    if(NOT stem STREQUAL idle-peers-memory)
      string(JSON median GET "${report}" rows ${i} median)
      if(NOT median GREATER 0)
        message(FATAL_ERROR "${stem}: ${ranks} ranks: median ${median}")
      endif()
    endif()
    if(stem STREQUAL idle-peers-ping-pong)
      string(JSON ratio GET "${report}" rows ${i} "vs first size")
      if(NOT ratio GREATER 0)
        message(FATAL_ERROR "${stem}: ${ranks} ranks: ratio to the 2-rank job ${ratio}")
      endif()
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
endforeach()
message(STATUS "idle peers: 2, 3 and 6-rank jobs took turns; every report has a row per size")
