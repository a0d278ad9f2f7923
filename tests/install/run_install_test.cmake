# CTest driver of the install test:
#   cmake -DBUILD_DIR=<tapegrad build tree> -DWORK_DIR=<scratch dir> -DCONSUMER_DIR=tests/install
#         -DREADME_SCRIPT=examples/readme_training.cpp -DGENERATOR=<generator> -DCXX_COMPILER=<compiler>
#         [-DWANT_DIST=ON -DMPIEXEC=<mpiexec>] -P run_install_test.cmake
# 1. installs the build tree into WORK_DIR/prefix (cmake --install),
# 2. configures and builds the consumer project against it (find_package(tapegrad) through
#    CMAKE_PREFIX_PATH, nothing else pointing into the source or build tree),
#    with plain flags: no build type, CMAKE_CXX_FLAGS=-O2; the consumer project fails if the package
#    imposes compile options or definitions,
# 3. runs the consumer (built as C++17 and as C++20), which checks a gradient, and the README's
#    training script, which must learn;
#    with WANT_DIST, find_package(tapegrad COMPONENTS dist) too, and a data-parallel consumer alone and
#    under mpirun -np 2.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/ScriptSteps.cmake)
require_variables(run_install_test BUILD_DIR WORK_DIR CONSUMER_DIR README_SCRIPT GENERATOR CXX_COMPILER)
macro(run step)
  run_step(run_install_test ${step} ${ARGN})
endmacro()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(install "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(header tapegrad/autograd/autograd.h tapegrad/autograd/tensor.h tapegrad/autograd/ops.h tapegrad/nn/nn.h tapegrad/io/safetensors.h tapegrad/train/trainer.h)
  if(NOT EXISTS "${prefix}/include/${header}")
    message(FATAL_ERROR "run_install_test: ${header} was not installed under ${prefix}/include")
  endif()
endforeach()
run(configure "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS=-O2 "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DREADME_SCRIPT=${README_SCRIPT}" "-DWANT_DIST=${WANT_DIST}"
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run(build "${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer")
run(run "${WORK_DIR}/consumer/consumer")
run(run_cxx20 "${WORK_DIR}/consumer/consumer_cxx20")
if(WANT_DIST)
  run(dist_alone "${WORK_DIR}/consumer/dist_consumer")
  run(dist_mpirun "${MPIEXEC}" --oversubscribe -np 2 "${WORK_DIR}/consumer/dist_consumer")
endif()
run(readme_training "${WORK_DIR}/consumer/readme_training" "${WORK_DIR}/readme_run")
