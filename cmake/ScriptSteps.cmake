# Helpers of the CTest drivers that run as `cmake -P` scripts (tests/install, tests/packaging).
#   require_variables(<script name> VAR...)  stops with an error naming the first VAR not set
#   run_step(<script name> <step> COMMAND...) runs COMMAND, prints its output, stops on a non-zero exit;
#                                             leaves its standard output in step_output
function(require_variables script)
  foreach(var ${ARGN})
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
      message(FATAL_ERROR "${script}: ${var} must be set")
    endif()
  endforeach()
endfunction()

function(run_step script step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("-- ${step}: ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${script}: ${step} failed (${rc})")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
