# Runs `ibdt-bench alltoallv --quick --json` at 2 ranks and checks that every
# ibdt row (and, when ibdt-bench was built with it, both Open MPI rows) has a
# positive time at each quick size of the regular distribution, that the
# in-place rows report their scratch, and that --out wrote the JSON and the
# regular distribution's SVG plot
# (a smoke test, not a speed test; every row's data was checked byte by byte
# by the bench itself, which exits non-zero otherwise).
# -DBENCH=<ibdt-bench> [-DEXPECT_OPENMPI=ON] [-DEXPECT_MPICH=ON]
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_bench_json.cmake)
set(outDir ${CMAKE_CURRENT_BINARY_DIR}/alltoallv-smoke)
set(svg ${outDir}/alltoallv-p2-regular.svg)
ibdt_run_bench_json_out(${outDir} alltoallv alltoallv --quick --ranks 2)

function(expect_row row)
  foreach(bytes 64 4096)  # the --quick sizes
    set(found OFF)
    foreach(i RANGE ${last})
      string(JSON name GET "${out}" rows ${i} row)
      string(JSON dist GET "${out}" rows ${i} dist)
      string(JSON rowBytes GET "${out}" rows ${i} "bytes/pair")
      if(name STREQUAL row AND dist STREQUAL "regular" AND rowBytes EQUAL bytes)
        set(found ON)
        string(JSON us GET "${out}" rows ${i} us)
        if(NOT us GREATER 0)
          message(FATAL_ERROR "row '${row}' at ${bytes} B: time ${us}")
        endif()
        if(row MATCHES "in-place" AND row MATCHES "^ibdt")
          string(JSON extra GET "${out}" rows ${i} "extra KiB/rank")
          if(NOT extra GREATER 0)
            message(FATAL_ERROR "row '${row}' at ${bytes} B: no scratch reported (${extra})")
          endif()
        endif()
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "no row '${row}' at ${bytes} B per pair:\n${out}")
    endif()
  endforeach()
endfunction()

foreach(row "ibdt alltoall" "ibdt alltoallv" "ibdt alltoallv init+run" "ibdt in-place 1%" "ibdt in-place 10%"
            "ibdt in-place 100%" "ibdt in-place" "ibdt alltoallv shared-memory")
  expect_row("${row}")
endforeach()
if(EXPECT_OPENMPI)
  expect_row("Open MPI alltoallv")
  expect_row("Open MPI alltoallv in-place")
endif()
if(NOT EXISTS ${svg})
  message(FATAL_ERROR "ibdt-bench alltoallv --out wrote no plot at ${svg}")
endif()
file(READ ${svg} plot)
if(NOT plot MATCHES "<svg" OR NOT plot MATCHES "<path")
  message(FATAL_ERROR "the plot at ${svg} has no lines")
endif()
