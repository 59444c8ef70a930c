# ctest helper: `mpirun -np 2 sim_multiprocess_test --rank-stops`, in which rank 1 stops itself (SIGSTOP) in the
# middle of a Run. Rank 0 must print exactly one line of its own, the DEADLINE_EXCEEDED error naming rank 1, and the
# job must end (not hang in MPI_Finalize) with a non-zero exit code within BOUND_SECONDS. mpirun adds its own
# notice about MPI_ABORT on stderr; only the program's lines ("sim_multiprocess_test: ...") are counted.
# cmake -DMPIRUN="mpirun;..." -DPROGRAM=... -DBOUND_SECONDS=30 -P stopped_rank.cmake
string(TIMESTAMP start "%s" UTC)
execute_process(COMMAND ${MPIRUN} -np 2 ${PROGRAM} --rank-stops TIMEOUT 80 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
string(TIMESTAMP end "%s" UTC)
math(EXPR seconds "${end} - ${start}")
message(STATUS "exit ${rc} after ${seconds} s; stderr:\n${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end by itself: ${rc}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although a rank was lost")
endif()
if(seconds GREATER BOUND_SECONDS)
  message(FATAL_ERROR "the job took ${seconds} s to end (bound ${BOUND_SECONDS} s)")
endif()
string(REPLACE ";" "," flat "${err}")  # a CMake list splits on ';'
string(REGEX MATCHALL "sim_multiprocess_test: [^\n]*" lines "${flat}")
list(LENGTH lines count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one error line from the surviving rank, got ${count}: ${lines}")
endif()
if(NOT lines MATCHES "^sim_multiprocess_test: DEADLINE_EXCEEDED: rank 1 \\(positions 4-7\\) sent nothing within [0-9]+ ms")
  message(FATAL_ERROR "expected DEADLINE_EXCEEDED naming rank 1, got: ${lines}")
endif()
