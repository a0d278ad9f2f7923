# A run stopped at STOP and resumed must end with the uninterrupted run's results:
#   cmake -DPROGRAM=path -DRUNS=dir -DSTOP=k "-DARGS=train;--flag;value..." [-DKEYS=k1;k2] -P ResumeSame.cmake
# Compares summary.json's KEYS (by default the spam classifier's test metrics, best step and scores, steps
# and final loss; never timing).
function(run_program)
  execute_process(COMMAND ${PROGRAM} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${ARGN} exited with ${status}:\n${out}${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${RUNS}/full ${RUNS}/split)
run_program(${ARGS} --run_dir ${RUNS}/full)
run_program(${ARGS} --run_dir ${RUNS}/split --stop_after ${STOP})
if(EXISTS ${RUNS}/split/summary.json)
  message(FATAL_ERROR "the run stopped at step ${STOP} wrote a summary")
endif()
run_program(${ARGS} --run_dir ${RUNS}/split --resume true)

file(READ ${RUNS}/full/summary.json full)
file(READ ${RUNS}/split/summary.json split)
if(NOT DEFINED KEYS)
  set(KEYS test_accuracy test_precision test_recall test_f1 test_loss test_confusion best_step best_val_f1
           best_val_loss steps final_loss)
endif()
foreach(key ${KEYS})
  string(JSON a GET "${full}" ${key})
  string(JSON b GET "${split}" ${key})
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "summary.json ${key}: uninterrupted ${a}, stopped at ${STOP} and resumed ${b}")
  endif()
endforeach()
