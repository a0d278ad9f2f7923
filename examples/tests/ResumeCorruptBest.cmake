# A run stopped at STOP whose best.json is then damaged must refuse to resume, naming the file
# and the field, with exit status 1 (not a crash):
#   cmake -DPROGRAM=path -DRUN=dir -DSTOP=k "-DARGS=train;--flag;value..." -DPATTERN=regex -P ResumeCorruptBest.cmake
file(REMOVE_RECURSE ${RUN})
execute_process(COMMAND ${PROGRAM} ${ARGS} --run_dir ${RUN} --stop_after ${STOP}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the run stopped at step ${STOP} exited with ${status}:\n${out}${err}")
endif()
if(NOT EXISTS ${RUN}/best.json)
  message(FATAL_ERROR "the run stopped at step ${STOP} wrote no best.json")
endif()
file(WRITE ${RUN}/best.json "{}\n")
execute_process(COMMAND ${PROGRAM} ${ARGS} --run_dir ${RUN} --resume true
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 1)
  message(FATAL_ERROR "resuming with a damaged best.json: expected exit status 1, got ${status}\n${out}${err}")
endif()
if(NOT err MATCHES "${PATTERN}")
  message(FATAL_ERROR "stderr does not match '${PATTERN}':\n${err}")
endif()
message(STATUS "refused: ${err}")
