# Included by the benchmark smoke tests (cmake -P scripts): runs
# `${BENCH} <args...> --json`, fails the test unless it exits 0 and prints
# JSON with a "rows" array, and sets `out` (the JSON) and `rows` (row count).
function(ibdt_run_bench_json)
  execute_process(COMMAND ${BENCH} ${ARGN} --json OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ibdt-bench ${ARGN} failed (${rc}): ${err}\n${json}")
  endif()
  string(JSON count ERROR_VARIABLE jsonError LENGTH "${json}" rows)
  if(jsonError)
    message(FATAL_ERROR "ibdt-bench ${ARGN} --json output does not parse: ${jsonError}\n${json}")
  endif()
  set(out "${json}" PARENT_SCOPE)
  set(rows ${count} PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# ibdt_run_bench_json with `--out outDir` (emptied first); also fails the
# test unless it wrote <outDir>/<stem>.json, and sets `last` (the last row's
# index).
function(ibdt_run_bench_json_out outDir stem)
  file(REMOVE_RECURSE ${outDir})
  ibdt_run_bench_json(${ARGN} --out ${outDir})
  if(NOT EXISTS ${outDir}/${stem}.json)
    message(FATAL_ERROR "ibdt-bench ${ARGN} --out wrote no JSON in ${outDir}")
  endif()
  math(EXPR lastRow "${rows} - 1")
  set(out "${out}" PARENT_SCOPE)
  set(rows ${rows} PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
  set(last ${lastRow} PARENT_SCOPE)
endfunction()
