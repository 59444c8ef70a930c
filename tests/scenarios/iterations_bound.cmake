# ctest helper: the pod-scale sweep (SCENARIO) with `iterations: 1000000` must be refused at once in abstract mode:
# exit 1, one line on stderr naming the field and the range that fits (docs/workloads.md), in a few seconds.
# cmake -DSPMDSIM=... -DSCENARIO=... -DWORK=<scratch dir> -P iterations_bound.cmake
file(MAKE_DIRECTORY ${WORK})
file(READ ${SCENARIO} text)
string(REGEX REPLACE "iterations: [0-9]+" "iterations: 1000000" text "${text}")
file(WRITE ${WORK}/max-iterations.yaml "${text}")
string(TIMESTAMP start "%s" UTC)
execute_process(COMMAND ${SPMDSIM} run --abstract ${WORK}/max-iterations.yaml --quiet TIMEOUT 50
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP end "%s" UTC)
math(EXPR seconds "${end} - ${start}")
message(STATUS "exit ${rc} after ${seconds} s: ${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit 1, got ${rc}")
endif()
string(REGEX MATCHALL "\n" lines "${err}")
list(LENGTH lines count)
if(NOT count EQUAL 1 OR NOT err MATCHES "iterations must be in \\[1, [0-9]+\\] for an abstract sweep of 45 rows on 65536 devices")
  message(FATAL_ERROR "expected one line naming iterations and its range, got: ${err}")
endif()
if(seconds GREATER 10)
  message(FATAL_ERROR "refusing took ${seconds} s")
endif()
