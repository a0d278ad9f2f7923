# cmake -DREADME=README.md -DSOURCE=examples/readme_example.cpp -P CheckReadmeExample.cmake
# Fails unless the lines between "// BEGIN README EXAMPLE" and "// END README EXAMPLE" in SOURCE
# appear verbatim, as one block, in README.md.
foreach(var README SOURCE)
  if(NOT DEFINED ${var} OR NOT EXISTS "${${var}}")
    message(FATAL_ERROR "CheckReadmeExample: ${var} is not set or does not exist: '${${var}}'")
  endif()
endforeach()

file(READ "${SOURCE}" source_text)
string(FIND "${source_text}" "// BEGIN README EXAMPLE\n" begin)
string(FIND "${source_text}" "// END README EXAMPLE" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "CheckReadmeExample: ${SOURCE} lacks the BEGIN/END README EXAMPLE markers")
endif()
string(LENGTH "// BEGIN README EXAMPLE\n" marker_length)
math(EXPR begin "${begin} + ${marker_length}")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${source_text}" ${begin} ${length} block)

file(READ "${README}" readme_text)
string(FIND "${readme_text}" "${block}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "CheckReadmeExample: the example block of ${SOURCE} is not in ${README} verbatim; "
                      "copy the lines between the markers into the README's code block")
endif()
message(STATUS "CheckReadmeExample: README.md shows ${SOURCE}'s example verbatim")
