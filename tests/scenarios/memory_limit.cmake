# ctest helper: runs scenarios/cpu8-sharded-memory.yaml under a per-process address-space limit (prlimit --as).
#   MODE=one   one process: must fail cleanly (a non-zero exit code, not a signal; exactly one error line on
#              stderr saying that host memory ran out); the run needs ~1.2 GiB of address space.
#   MODE=many  `mpirun -np NP` with the same limit on every rank: must pass and report each rank's peak RSS.
# Both set MALLOC_ARENA_MAX=2 and --threads 2 so that the address space reserved besides the data (malloc
# arenas, worker and MPI threads' stacks, fiber stack reservations) does not grow with the machine's cores.
# cmake -DSPMDSIM=... -DMPIRUN="mpirun;..." -DNP=4 -DLIMIT_MIB=640 -DSCENARIO=... -DMODE=one|many -P memory_limit.cmake
math(EXPR limit "${LIMIT_MIB} * 1024 * 1024")
set(ENV{MALLOC_ARENA_MAX} 2)
set(run "${SPMDSIM}" run "${SCENARIO}" --threads 2)
if(MODE STREQUAL "one")
  execute_process(COMMAND prlimit --as=${limit} ${run} --quiet RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message(STATUS "one process under ${LIMIT_MIB} MiB: exit ${rc}: ${err}")
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "the one-process run crashed: ${rc}")
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "the one-process run fitted ${LIMIT_MIB} MiB: the limit no longer shows anything")
  endif()
  string(REGEX MATCHALL "\n" lines "${err}")
  list(LENGTH lines count)
  if(NOT count EQUAL 1 OR NOT err MATCHES "^spmdsim run: RESOURCE_EXHAUSTED: .*(host memory|ran out of memory)")
    message(FATAL_ERROR "expected one line saying host memory ran out, got: ${err}")
  endif()
else()
  execute_process(COMMAND ${MPIRUN} -x MALLOC_ARENA_MAX -np ${NP} prlimit --as=${limit} ${run}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCH "peak RSS per rank[^\n]*" rss "${out}")
  message(STATUS "${NP} ranks under ${LIMIT_MIB} MiB each: exit ${rc}; ${rss}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpirun -np ${NP} under ${LIMIT_MIB} MiB per rank failed (${rc}): ${err}")
  endif()
  if(NOT rss)
    message(FATAL_ERROR "no per-rank peak RSS in the report: ${out}")
  endif()
endif()
