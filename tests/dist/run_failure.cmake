# Runs tests/dist/dist_failures.cpp under mpirun and checks that the job ends, with a non-zero exit,
# within LIMIT seconds, and that its output contains EXPECT.
#   cmake -DMPIEXEC=... -DPROGRAM=... -DMODE=throw|timeout -DEXPECT=... -DLIMIT=seconds -P run_failure.cmake
cmake_policy(VERSION 3.20)
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} ${MPIEXEC_FLAGS} -np 2 ${PROGRAM} ${MODE}
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output
  TIMEOUT 120)
string(TIMESTAMP stop "%s")
math(EXPR took "${stop} - ${start}")
message(STATUS "mpirun ${MODE}: exit '${result}' after ${took} s; output:\n${output}")
if(result STREQUAL "0")
  message(FATAL_ERROR "run_failure: the job exited 0; a failed rank must fail the job")
endif()
if(result MATCHES "timeout")
  message(FATAL_ERROR "run_failure: the job hung (killed after 120 s)")
endif()
if(took GREATER LIMIT)
  message(FATAL_ERROR "run_failure: the job took ${took} s, more than ${LIMIT} s")
endif()
string(FIND "${output}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "run_failure: the output does not contain '${EXPECT}'")
endif()
