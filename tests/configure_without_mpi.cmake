# Configures the project with -DTAPEGRAD_MPI=OFF (tests and examples on, no benchmarks) and checks
# that it configures without tapegrad::dist: no dist library, no tests/dist programs, and the
# examples' DataParallel built in its one-process form (no second copy of it for the MPI builds).
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=... -P configure_without_mpi.cmake
cmake_policy(VERSION 3.20)
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
          "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_MPI=OFF
          -DTAPEGRAD_BUILD_TESTS=ON -DTAPEGRAD_BUILD_EXAMPLES=ON -DTAPEGRAD_BUILD_BENCH=OFF
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configure_without_mpi: cmake -DTAPEGRAD_MPI=OFF failed (${result}):\n${output}")
endif()
# The generated build's targets, from the generator's own listing.
execute_process(
  COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}" --target help
  RESULT_VARIABLE result
  OUTPUT_VARIABLE targets
  ERROR_VARIABLE targets)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configure_without_mpi: cannot list the targets:\n${targets}")
endif()
foreach(absent tapegrad_dist dist_tests dist_failures data_parallel_without_dist data_parallel_failure)
  if(targets MATCHES "(^|[\n :])${absent}[:\n ]")
    message(FATAL_ERROR "configure_without_mpi: target ${absent} exists in a build without MPI")
  endif()
endforeach()
foreach(present tapegrad tapegrad_tests language_model word2vec tapegrad_examples_common)
  if(NOT targets MATCHES "(^|[\n :])${present}[:\n ]")
    message(FATAL_ERROR "configure_without_mpi: target ${present} is missing:\n${targets}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "configure_without_mpi: configured without tapegrad::dist")
