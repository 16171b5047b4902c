message(STATUS "ibdt ${PROJECT_VERSION}: verbs=${IBDT_HAVE_VERBS} pmix=${IBDT_HAVE_PMIX} mpi=${IBDT_HAVE_MPI} simgrid=${IBDT_HAVE_SIMGRID} "
               "werror=${IBDT_WERROR} sanitize='${IBDT_SANITIZE}' build=${CMAKE_BUILD_TYPE}")
