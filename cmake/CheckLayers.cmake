# Checks that the library's layers depend one way (docs/architecture.md):
#   autograd <- io <- data ; autograd <- nn <- optim ; train on all of them
# A file in tapegrad/<layer>/ may include only tapegrad/<allowed>/ headers for its layer, and no
# file of the library may include an example's or a test's header.
#   cmake -DSOURCE_DIR=<tapegrad source tree> -P cmake/CheckLayers.cmake
cmake_policy(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "CheckLayers: SOURCE_DIR must be set")
endif()

set(allowed_autograd autograd)
set(allowed_nn autograd nn)
set(allowed_optim autograd nn optim)
set(allowed_io autograd io)
set(allowed_data autograd io data)
set(allowed_train autograd nn optim io data train)
set(layers autograd io nn optim data train)

set(violations "")
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/tapegrad/*.h" "${SOURCE_DIR}/tapegrad/*.cpp")
foreach(file ${files})
  string(REGEX MATCH "^tapegrad/([a-z_]+)/" _ "${file}")
  set(layer "${CMAKE_MATCH_1}")
  if(layer STREQUAL "")
    continue()  # tapegrad/tapegrad.h includes every layer
  endif()
  if(NOT layer IN_LIST layers)
    list(APPEND violations "${file}: folder '${layer}' is not a known layer (add it to cmake/CheckLayers.cmake)")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(line ${includes})
    if(line MATCHES "[\"<](examples|tests|bench)/")
      list(APPEND violations "${file}: includes a program's header: ${line}")
    elseif(line MATCHES "[\"<]tapegrad/([a-z_]+)/")
      set(target "${CMAKE_MATCH_1}")
      if(NOT target IN_LIST allowed_${layer})
        list(APPEND violations "${file}: the ${layer} layer includes the ${target} layer: ${line}")
      endif()
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "CheckLayers: includes against the layer order:\n  ${text}")
endif()
list(LENGTH files count)
message(STATUS "CheckLayers: ${count} files, every include follows the layer order")
