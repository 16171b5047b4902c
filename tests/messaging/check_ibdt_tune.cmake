# ibdt-tune end to end (docs/tuning.md): it measures over shm, writes a
# tuning file of the right structure with plausible fitted costs, and a
# Context's loader (as ibdt-info shows it) takes that file as in force.
# Structure and ranges only: never a speed.
set(file ${WORK_DIR}/ibdt-tune-smoke.json)
file(REMOVE ${file})
execute_process(COMMAND ${TUNE} --provider shm --output ${file} --reps 3 --alltoall-ranks 4
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ibdt-tune failed (${status}):\n${out}\n${err}")
endif()
file(READ ${file} json)
string(JSON format GET "${json}" format)
string(JSON provider GET "${json}" host provider)
string(JSON cores GET "${json}" host cores)
if(NOT format STREQUAL "ibdt-tune" OR NOT provider STREQUAL "shm" OR cores LESS 1)
  message(FATAL_ERROR "ibdt-tune wrote an unexpected header:\n${json}")
endif()
# Every path shm takes was measured; no fitted cost falls with size.
foreach(path pipelined pipelined-contig contig bc-spup rwg-up multi-w)
  string(JSON message ERROR_VARIABLE missing GET "${json}" paths ${path} per_message_ns)
  if(missing)
    message(FATAL_ERROR "ibdt-tune wrote no ${path}: ${missing}\n${json}")
  endif()
  string(JSON byte GET "${json}" paths ${path} per_byte_ns)
  string(JSON block GET "${json}" paths ${path} per_block_ns)
  # CMake has no float arithmetic: compare the terms one by one.
  if(byte LESS 0 OR block LESS 0 OR message GREATER 1e9)
    message(FATAL_ERROR "${path}: implausible fit ${message} ns + ${byte} ns/B + ${block} ns/block\n${json}")
  endif()
endforeach()
# The alltoall timings: every algorithm's run and plan creation, direct-write
# and hierarchical (on 2 simulated nodes) included (docs/alltoall-selection.md).
foreach(fit alltoall/pairwise alltoall/direct-write alltoall-init/pairwise alltoall-init/direct-write
    alltoall/hierarchical alltoall-init/hierarchical)
  string(JSON byte ERROR_VARIABLE missing GET "${json}" collectives fits ${fit} per_byte_ns)
  if(missing)
    message(FATAL_ERROR "ibdt-tune wrote no ${fit} fit: ${missing}\n${json}")
  endif()
  string(JSON message GET "${json}" collectives fits ${fit} per_message_ns)
  if(byte LESS 0 OR message LESS 0)
    message(FATAL_ERROR "${fit}: implausible fit ${message} ns/message + ${byte} ns/B\n${json}")
  endif()
endforeach()
set(ENV{IBDT_TUNE_FILE} ${file})
execute_process(COMMAND ${INFO} RESULT_VARIABLE status OUTPUT_VARIABLE info ERROR_VARIABLE err TIMEOUT 60)
if(NOT info MATCHES "tuning: in force: ${file}" OR NOT info MATCHES "bc-spup +[-0-9.]+ ns/message")
  message(FATAL_ERROR "ibdt-info does not show the file in force:\n${info}\n${err}")
endif()
# The paths were timed in rounds; ibdt-sim's rules are listed (none in ibdt-tune's own file).
string(JSON rounds GET "${json}" rounds count)
string(JSON layouts GET "${json}" rounds layouts)
if(NOT rounds EQUAL 5 OR NOT layouts EQUAL 10)
  message(FATAL_ERROR "ibdt-tune wrote rounds ${rounds} over ${layouts} layouts, expected 5 over 10:\n${json}")
endif()
if(NOT info MATCHES "timed in 5 rounds; they disagreed on the fastest path at [0-9]+ of 10 layouts"
   OR NOT info MATCHES "alltoall rules \\(ibdt-sim\\) from ${file}: no rules")
  message(FATAL_ERROR "ibdt-info does not show the rounds and rules:\n${info}\n${err}")
endif()
# A damaged file is ignored with a reason, never a crash.
file(WRITE ${file} "{\"format\": \"ibdt-tune\", \"form")
execute_process(COMMAND ${INFO} RESULT_VARIABLE status OUTPUT_VARIABLE info ERROR_VARIABLE err TIMEOUT 60)
if(NOT info MATCHES "tuning: ignored .*not valid JSON")
  message(FATAL_ERROR "ibdt-info on a damaged file:\n${info}\n${err}")
endif()
file(REMOVE ${file})
# One rank count cannot separate a call's fixed cost from its cost per
# message: refused before anything is measured, with the reason.
execute_process(COMMAND ${TUNE} --provider shm --output ${file} --alltoall-ranks 2
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
if(status EQUAL 0 OR NOT "${out}${err}" MATCHES "at least 3 ranks" OR EXISTS ${file})
  message(FATAL_ERROR "ibdt-tune --alltoall-ranks 2 was not refused (${status}):\n${out}\n${err}")
endif()
