# Multi-process tests.
#
# ibdt_add_mp_test(NAME <name> NP <ranks> COMMAND <target-or-program> [args...]
#                  [LAUNCHER ibdt-run|openmpi|mpich] [NODES <k>] [TIMEOUT <s>]
#                  [LABELS <labels...>])
#   Registers a ctest that runs COMMAND as NP ranks of one job. The default
#   launcher is ibdt-run (`ibdt-run -n NP [--nodes K] --timeout TIMEOUT --`),
#   which stops the whole job as soon as one rank fails and names that rank;
#   `openmpi` uses Open MPI's mpirun (PMIx), `mpich` uses mpiexec.mpich
#   (Hydra, PMI-1); those are skipped (not registered) when not installed.
#   A target name as the first word of COMMAND becomes its file path.
#   Labels always include `mp` and the launcher's name.
#
# ibdt_add_mp_gtest(<name> SOURCES <files...> NP <ranks...> [LAUNCHERS ...]
#                   [NODES <k>] [TIMEOUT <s>] [LABELS <labels...>])
#   Builds a gtest binary whose main() joins the job (tests/support/mp_test.h:
#   every rank runs every test, peers meet through ibdt::test::mpStore(), and
#   a failure on any rank stops all ranks) and registers one ctest per NP
#   value and launcher, e.g. fabric_mp_test_np4 (ibdt-run),
#   fabric_mp_test_openmpi_np4. Example:
#     ibdt_add_mp_gtest(fabric_mp_test SOURCES shm_mp_test.cc NP 2 4 8 LABELS fabric)

set(IBDT_MP_TEST_TIMEOUT 60 CACHE STRING "Default per-job timeout (seconds) of multi-process tests")

add_library(ibdt_mp_gtest_main STATIC ${CMAKE_CURRENT_LIST_DIR}/support/mp_gtest_main.cc)
target_link_libraries(ibdt_mp_gtest_main PUBLIC ibdt_static GTest::gtest GTest::gmock)
target_include_directories(ibdt_mp_gtest_main PUBLIC ${CMAKE_CURRENT_LIST_DIR})

function(ibdt_add_mp_test)
  cmake_parse_arguments(ARG "" "NAME;NP;LAUNCHER;NODES;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_NP OR NOT ARG_COMMAND)
    message(FATAL_ERROR "ibdt_add_mp_test needs NAME, NP and COMMAND")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT ${IBDT_MP_TEST_TIMEOUT})
  endif()
  if(NOT ARG_LAUNCHER)
    set(ARG_LAUNCHER ibdt-run)
  endif()
  list(POP_FRONT ARG_COMMAND program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  # (Leaks inside libpmix are suppressed by the asan test preset's
  # LSAN_OPTIONS, which the launchers pass on to the ranks.)
  set(environment "")
  if(ARG_LAUNCHER STREQUAL "ibdt-run")
    set(launch $<TARGET_FILE:ibdt-run> -n ${ARG_NP} --timeout ${ARG_TIMEOUT})
    if(ARG_NODES)
      list(APPEND launch --nodes ${ARG_NODES})
    endif()
    list(APPEND launch --)
  elseif(ARG_LAUNCHER STREQUAL "openmpi")
    if(NOT IBDT_MPIEXEC_OPENMPI)
      return()
    endif()
    # mpirun refuses root without both variables, and more ranks than cores
    # without --oversubscribe.
    set(launch ${IBDT_MPIEXEC_OPENMPI} --oversubscribe --timeout ${ARG_TIMEOUT} -n ${ARG_NP})
    list(APPEND environment OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  elseif(ARG_LAUNCHER STREQUAL "mpich")
    if(NOT IBDT_MPIEXEC_MPICH)
      return()
    endif()
    set(launch ${IBDT_MPIEXEC_MPICH} -n ${ARG_NP})
    list(APPEND environment MPIEXEC_TIMEOUT=${ARG_TIMEOUT})
  else()
    message(FATAL_ERROR "ibdt_add_mp_test: unknown LAUNCHER '${ARG_LAUNCHER}'")
  endif()
  add_test(NAME ${ARG_NAME} COMMAND ${launch} ${program} ${ARG_COMMAND})
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 30")
  set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ctest_timeout} PROCESSORS 2
    LABELS "mp;${ARG_LAUNCHER};${ARG_LABELS}")
  if(environment)
    set_tests_properties(${ARG_NAME} PROPERTIES ENVIRONMENT "${environment}")
  endif()
endfunction()

function(ibdt_add_mp_gtest name)
  cmake_parse_arguments(ARG "" "NODES;TIMEOUT" "SOURCES;NP;LAUNCHERS;LABELS" ${ARGN})
  if(NOT ARG_LAUNCHERS)
    set(ARG_LAUNCHERS ibdt-run)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ibdt_mp_gtest_main)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  ibdt_use_gtest_pch(${name})
  foreach(launcher IN LISTS ARG_LAUNCHERS)
    foreach(np IN LISTS ARG_NP)
      if(launcher STREQUAL "ibdt-run")
        set(test_name ${name}_np${np})
      else()
        set(test_name ${name}_${launcher}_np${np})
      endif()
      set(extra "")
      if(ARG_NODES AND launcher STREQUAL "ibdt-run")
        set(extra NODES ${ARG_NODES})
      endif()
      if(ARG_TIMEOUT)
        list(APPEND extra TIMEOUT ${ARG_TIMEOUT})
      endif()
      ibdt_add_mp_test(NAME ${test_name} NP ${np} LAUNCHER ${launcher} COMMAND ${name} ${extra}
        LABELS ${ARG_LABELS})
    endforeach()
  endforeach()
endfunction()
