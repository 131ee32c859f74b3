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
# The mode is the script's argument. coverage reads the files only (lint_);
# the others run their examples on the database (it_).
set(_r SCRIPT run_examples.sh LABELS readme TIMEOUT 300
    ENVIRONMENT ${_oq_readme_env})
oq_add_script_test(NAME lint_readme_coverage ARGS coverage ${_r})
oq_add_script_test(NAME it_readme_psql ARGS psql ${_r})
oq_add_script_test(NAME it_readme_python ARGS python ${_r})
oq_add_script_test(NAME it_readme_node ARGS node ${_r})
oq_add_script_test(NAME it_readme_c_api ARGS c_api ${_r})
oq_add_script_test(NAME it_readme_worker ARGS worker ${_r})
oq_add_script_test(NAME it_readme_install ARGS install ${_r})
