# Runs `ibdt-bench alltoall --quick --json` and checks that every ibdt row,
# the memcpy row and (when ibdt-bench was built with them) the Open MPI rows
# at 2, 4, 8 ranks and the MPICH rows at 2 ranks have a positive time at each
# quick size (a smoke test, not a speed test; every row's data was checked
# byte by byte by the bench itself, which exits non-zero otherwise).
# -DBENCH=<ibdt-bench> [-DEXPECT_OPENMPI=ON] [-DEXPECT_MPICH=ON]
# With -DNODES=<k>: only the hierarchical rows (leader exchange auto and Bruck)
# at 4 ranks on k simulated nodes.
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_bench_json.cmake)
if(DEFINED NODES)
  ibdt_run_bench_json(alltoall --quick --ranks 4 --nodes ${NODES} --algorithm hierarchical --algorithm hierarchical-bruck
                      --row "ibdt contig"
                      --row "ibdt vector")
else()
  ibdt_run_bench_json(alltoall --quick)
endif()
math(EXPR last "${rows} - 1")

function(expect_row row ranks)
  foreach(bytes 8 4096)  # the --quick sizes
    set(found OFF)
    foreach(i RANGE ${last})
      string(JSON name GET "${out}" rows ${i} row)
      string(JSON rowRanks GET "${out}" rows ${i} ranks)
      string(JSON rowBytes GET "${out}" rows ${i} "bytes/pair")
      if(name STREQUAL row AND rowRanks EQUAL ranks AND rowBytes EQUAL bytes)
        set(found ON)
        string(JSON us GET "${out}" rows ${i} us)
        if(NOT us GREATER 0)
          message(FATAL_ERROR "row '${row}' at ${ranks} ranks, ${bytes} B: time ${us}")
        endif()
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "no row '${row}' at ${ranks} ranks, ${bytes} B per pair:\n${out}")
    endif()
  endforeach()
endfunction()

if(DEFINED NODES)
  expect_row("ibdt hierarchical contig" 4)
  expect_row("ibdt hierarchical vector" 4)
  expect_row("ibdt hierarchical-bruck contig" 4)
  expect_row("ibdt hierarchical-bruck vector" 4)
  return()
endif()

foreach(ranks 2 4 8)
  foreach(row "ibdt contig" "ibdt vector" "memcpy")
    expect_row("${row}" ${ranks})
  endforeach()
  if(EXPECT_OPENMPI)
    expect_row("Open MPI contig" ${ranks})
    expect_row("Open MPI vector" ${ranks})
  endif()
endforeach()
if(EXPECT_MPICH)
  expect_row("MPICH contig" 2)
  expect_row("MPICH vector" 2)
endif()
