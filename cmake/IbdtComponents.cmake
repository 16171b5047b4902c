# Detects the optional components. Each is AUTO (use when found), ON (fail
# when missing) or OFF. Results: IBDT_HAVE_VERBS, IBDT_HAVE_PMIX, IBDT_HAVE_MPI,
# IBDT_HAVE_SIMGRID.
find_package(PkgConfig)

function(ibdt_resolve_component name found)
  set(mode "${IBDT_WITH_${name}}")
  string(TOUPPER "${mode}" mode)
  if(mode STREQUAL "OFF")
    set(IBDT_HAVE_${name} OFF PARENT_SCOPE)
  elseif(found)
    set(IBDT_HAVE_${name} ON PARENT_SCOPE)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "IBDT_WITH_${name}=ON but its dependency was not found")
  else()
    set(IBDT_HAVE_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

# A pkg-config based component: looks up `modules` (the first one decides)
# unless the component is OFF, then resolves it.
macro(ibdt_pkg_component name)
  set(_found OFF)
  if(NOT IBDT_WITH_${name} STREQUAL "OFF" AND PkgConfig_FOUND)
    set(_specs ${ARGN})
    foreach(_spec IN LISTS _specs)
      string(REPLACE "=" ";" _pair ${_spec})
      list(GET _pair 0 _prefix)
      list(GET _pair 1 _module)
      pkg_check_modules(${_prefix} IMPORTED_TARGET ${_module})
    endforeach()
    list(GET _specs 0 _first)
    string(REGEX REPLACE "=.*" "" _first ${_first})
    set(_found ${${_first}_FOUND})
  endif()
  ibdt_resolve_component(${name} "${_found}")
endmacro()

# rdma-core (libibverbs decides; librdmacm is optional) and PMIx.
ibdt_pkg_component(VERBS IBVERBS=libibverbs RDMACM=librdmacm)
ibdt_pkg_component(PMIX PMIX=pmix)
# SimGrid (ibdt-sim): Debian 12 ships simgrid.pc and no CMake package.
ibdt_pkg_component(SIMGRID SIMGRID=simgrid)

# MPI: Open MPI and MPICH are looked up separately, by their own wrappers, so
# that benchmarks can measure both side by side in one run.
set(_mpi_found OFF)
if(NOT IBDT_WITH_MPI STREQUAL "OFF")
  find_program(IBDT_MPICXX_OPENMPI NAMES mpicxx.openmpi)
  find_program(IBDT_MPIEXEC_OPENMPI NAMES mpirun.openmpi)
  find_program(IBDT_MPICXX_MPICH NAMES mpicxx.mpich)
  find_program(IBDT_MPIEXEC_MPICH NAMES mpiexec.mpich)
  if(IBDT_MPICXX_OPENMPI OR IBDT_MPICXX_MPICH)
    set(_mpi_found ON)
  endif()
endif()
ibdt_resolve_component(MPI ${_mpi_found})
