# README tests (LABEL readme): every example and command in README.md is run
# by one of these, extracted from the README at test time by extract.sh, so
# the README cannot drift. See run_examples.sh for what each mode runs.
# The database modes need ONCEQ_TEST_DSN (test/run.sh sets it) and skip
# (exit 77) without it.
cmake_path(ABSOLUTE_PATH CMAKE_CURRENT_LIST_DIR NORMALIZE OUTPUT_VARIABLE
           _oq_readme_dir)
cmake_path(APPEND _oq_readme_dir ../../lib/include OUTPUT_VARIABLE _oq_inc)
cmake_path(NORMAL_PATH _oq_inc)
set(_oq_readme_env
    "ONCEQ_BIN=$<TARGET_FILE:onceq>"
    "ONCEQ_WORKER_BIN=$<TARGET_FILE:onceq-worker>"
    "ONCEQ_STATIC_LIB=$<TARGET_FILE:onceq_static>"
    "ONCEQ_INCLUDE_DIR=${_oq_inc}"
    "ONCEQ_GEN_INCLUDE_DIR=${CMAKE_BINARY_DIR}/lib/include"
    "ONCEQ_CC=${CMAKE_C_COMPILER}"
    "ONCEQ_SANITIZER=${ONCEQ_SANITIZER}"
    "ONCEQ_BUILD_DIR=${CMAKE_BINARY_DIR}"
    "ONCEQ_CMAKE=${CMAKE_COMMAND}")
foreach(_ex coverage psql python node c_api worker install)
  oq_add_script_test(NAME readme_${_ex} SCRIPT run_examples.sh ARGS ${_ex}
                     LABELS readme TIMEOUT 300 ENVIRONMENT ${_oq_readme_env})
endforeach()
