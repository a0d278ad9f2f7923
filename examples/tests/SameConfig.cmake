# The committed config file must hold exactly the program's built-in defaults, so running the
# program with no flags and with --config FILE is the same experiment:
#   cmake -DPROGRAM=path -DMODE=toy|"" -DCONFIG=file -P SameConfig.cmake
execute_process(COMMAND ${PROGRAM} ${MODE} --print-config RESULT_VARIABLE s1 OUTPUT_VARIABLE defaults ERROR_VARIABLE e1)
execute_process(COMMAND ${PROGRAM} ${MODE} --config ${CONFIG} --print-config RESULT_VARIABLE s2 OUTPUT_VARIABLE from_file
                ERROR_VARIABLE e2)
if(NOT s1 EQUAL 0 OR NOT s2 EQUAL 0)
  message(FATAL_ERROR "--print-config failed: ${e1}${e2}")
endif()
if(NOT defaults STREQUAL from_file)
  message(FATAL_ERROR "${CONFIG} differs from the built-in defaults.\ndefaults:\n${defaults}\nfile:\n${from_file}")
endif()
file(READ ${CONFIG} committed)
string(JSON keys LENGTH "${committed}")
string(JSON all LENGTH "${defaults}")
if(NOT keys EQUAL all)
  message(FATAL_ERROR "${CONFIG} has ${keys} keys, the program ${all}: write every key")
endif()
