# CTest driver of the packaging tests, one per MODE:
#   cmake -DMODE=fetchcontent|pkgconfig|deb -DSOURCE_DIR=<tapegrad> -DBUILD_DIR=<its build tree>
#         -DWORK_DIR=<scratch dir> -DGENERATOR=<generator> -DCXX_COMPILER=<compiler> -P run_packaging_test.cmake
# fetchcontent: configures tests/packaging/fetchcontent (tapegrad by FetchContent from SOURCE_DIR, no build
#               type: the library compiles as a parent project's default would), builds it and runs the
#               consumer (tests/install/main.cpp checks a gradient and a module).
# pkgconfig:    installs BUILD_DIR into WORK_DIR/prefix, compiles the consumer with plain -O2 and the flags
#               `pkg-config --cflags --libs tapegrad` gives, runs it.
# deb:          makes the Debian package with `cpack -G DEB`, checks its name and dependencies, extracts it
#               (dpkg-deb -x, so the machine is not changed) and builds tests/install against the extracted
#               /usr with find_package(tapegrad), then the consumer again through the extracted .pc file.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/ScriptSteps.cmake)
require_variables(run_packaging_test MODE SOURCE_DIR BUILD_DIR WORK_DIR GENERATOR CXX_COMPILER)
macro(run step)
  run_step(run_packaging_test ${step} ${ARGN})
endmacro()
set(consumer_source "${SOURCE_DIR}/tests/install/main.cpp")

# Compiles the consumer with the flags pkg-config gives for the .pc files under pc_dir, and runs it.
function(build_with_pkg_config pc_dir out_dir)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run(pkg_config pkg-config --cflags --libs tapegrad)
  string(STRIP "${step_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY "${out_dir}")
  run(compile "${CXX_COMPILER}" -O2 -std=c++17 -Wall -Wextra -Werror "${consumer_source}" ${flags}
      -o "${out_dir}/consumer")
  run(run "${out_dir}/consumer")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
if(MODE STREQUAL "fetchcontent")
  run(configure "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/packaging/fetchcontent" -B "${WORK_DIR}" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE= "-DTAPEGRAD_SOURCE_DIR=${SOURCE_DIR}"
      "-DCONSUMER_SOURCE=${consumer_source}")
  run(build "${CMAKE_COMMAND}" --build "${WORK_DIR}" -j 2)
  run(run "${WORK_DIR}/consumer")
elseif(MODE STREQUAL "pkgconfig")
  set(prefix "${WORK_DIR}/prefix")
  run(install "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
  file(GLOB pc_files "${prefix}/*/pkgconfig/tapegrad.pc" "${prefix}/*/*/pkgconfig/tapegrad.pc")
  list(LENGTH pc_files count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "run_packaging_test: expected one tapegrad.pc under ${prefix}, found '${pc_files}'")
  endif()
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  build_with_pkg_config("${pc_dir}" "${WORK_DIR}/consumer")
elseif(MODE STREQUAL "deb")
  run(cpack cpack -G DEB --config "${BUILD_DIR}/CPackConfig.cmake" -B "${WORK_DIR}/deb")
  file(GLOB debs "${WORK_DIR}/deb/*.deb")
  list(LENGTH debs count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "run_packaging_test: cpack made '${debs}', expected one .deb")
  endif()
  run(fields dpkg-deb --field "${debs}" Package Depends)
  if(NOT step_output MATCHES "Package: libtapegrad-dev" OR NOT step_output MATCHES "libopenblas-dev")
    message(FATAL_ERROR "run_packaging_test: unexpected control fields:\n${step_output}")
  endif()
  set(root "${WORK_DIR}/root")
  run(extract dpkg-deb -x "${debs}" "${root}")
  foreach(file usr/include/tapegrad/tapegrad.h usr/include/tapegrad/nn/key_map.h)
    if(NOT EXISTS "${root}/${file}")
      message(FATAL_ERROR "run_packaging_test: the package does not install /${file}")
    endif()
  endforeach()
  file(GLOB_RECURSE configs "${root}/usr/*/tapegradConfig.cmake")
  file(GLOB_RECURSE pc_files "${root}/usr/*/tapegrad.pc")
  if(NOT configs OR NOT pc_files)
    message(FATAL_ERROR "run_packaging_test: the package lacks the CMake package ('${configs}') or the .pc ('${pc_files}')")
  endif()
  run(configure "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/install" -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS=-O2 "-DCMAKE_PREFIX_PATH=${root}/usr"
      -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
  run(build "${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer")
  run(run "${WORK_DIR}/consumer/consumer")
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  build_with_pkg_config("${pc_dir}" "${WORK_DIR}/pkg_config_consumer")
else()
  message(FATAL_ERROR "run_packaging_test: unknown MODE '${MODE}'")
endif()
