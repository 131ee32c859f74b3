# How a test directory registers its tests (docs/testing.md, "Naming").
#
# oq_add_script_test(NAME name SCRIPT path
#                    [LABELS label...] [TIMEOUT s (default 120)] [RUN_SERIAL]
#                    [ARGS arg...] [ENVIRONMENT K=V...]
#                    [RUNNER command...] [NEEDS target...])
#   Registers a test that runs a script: `bash path args` for *.sh, else
#   `RUNNER... path args` (e.g. RUNNER bash pyrun.sh for Python). Every
#   script test skips with exit 77 (SKIP_RETURN_CODE) and gets in its
#   environment ONCEQ_TEST_NAME (its own name, for the skip message) and
#   the binaries this build has: ONCEQ_CLI (onceq), ONCEQ_WORKER
#   (onceq-worker), ONCEQ_CUTPROXY (the fault proxy). NEEDS names targets
#   without which the test is not registered at all (a library-only build
#   has no daemons). LABELS default to the kind in the name (oq_test_kind).
#
# oq_include_test_groups(): include every *.cmake beside the calling
#   CMakeLists.txt, sorted: each group of tests registers itself in its own
#   file, so independent suites never edit the same list.

# The naming scheme <kind>_<area>_<what>: kind = unit (no database) | it
# (needs the database) | chaos | model | fuzz | lint; area = lib | worker |
# cli | coord | deploy | readme | pkg.
set(OQ_TEST_NAME_REGEX
    "^(unit|it|chaos|model|fuzz|lint)_(lib|worker|cli|coord|deploy|readme|pkg)_[a-z0-9_]+$")

# oq_test_check_name(name): a warning for a name outside the scheme, when it
# is registered; lint_pkg_test_names (test/lint/test_names.sh) fails on it,
# whichever way the test was added.
function(oq_test_check_name name)
  if(NOT name MATCHES "${OQ_TEST_NAME_REGEX}")
    message(WARNING
      "test name '${name}' does not follow <kind>_<area>_<what> "
      "(kind: unit|it|chaos|model|fuzz|lint; area: "
      "lib|worker|cli|coord|deploy|readme|pkg); see docs/testing.md")
  endif()
endfunction()

# oq_test_kind(name out_var): the ctest labels a test's kind implies, which
# test/run.sh's passes select on: unit, lint and model need no database
# (label unit); it and chaos need ONCEQ_TEST_DSN (integration); fuzz runs
# in its own pass (fuzz).
function(oq_test_kind name out)
  string(REGEX MATCH "^[a-z]+" kind "${name}")
  if(kind MATCHES "^(unit|lint|model)$")
    set(${out} unit PARENT_SCOPE)
  elseif(kind MATCHES "^(it|chaos)$")
    set(${out} integration PARENT_SCOPE)
  elseif(kind STREQUAL "fuzz")
    set(${out} fuzz PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# oq_test_env(name out_var): the environment every test gets.
function(oq_test_env name out)
  set(env "ONCEQ_TEST_NAME=${name}")
  if(TARGET onceq)
    list(APPEND env "ONCEQ_CLI=$<TARGET_FILE:onceq>")
  endif()
  if(TARGET onceq-worker)
    list(APPEND env "ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>")
  endif()
  if(TARGET oq_cutproxy)
    list(APPEND env "ONCEQ_CUTPROXY=$<TARGET_FILE:oq_cutproxy>")
  endif()
  set(${out} "${env}" PARENT_SCOPE)
endfunction()

function(oq_add_script_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME;SCRIPT;TIMEOUT"
                        "LABELS;ARGS;ENVIRONMENT;RUNNER;NEEDS" ${ARGN})
  if(NOT T_NAME OR NOT T_SCRIPT)
    message(FATAL_ERROR "oq_add_script_test: NAME and SCRIPT are required")
  endif()
  oq_test_check_name(${T_NAME})
  foreach(tgt IN LISTS T_NEEDS)
    if(NOT TARGET ${tgt})
      return()
    endif()
  endforeach()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_LABELS)
    oq_test_kind(${T_NAME} T_LABELS)
  endif()
  if(NOT IS_ABSOLUTE "${T_SCRIPT}")
    set(T_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/${T_SCRIPT})
  endif()
  if(NOT T_RUNNER)
    if(T_SCRIPT MATCHES "\\.sh$")
      set(T_RUNNER bash)
    else()
      message(FATAL_ERROR "oq_add_script_test(${T_NAME}): RUNNER needed for ${T_SCRIPT}")
    endif()
  endif()
  oq_test_env(${T_NAME} env)
  list(APPEND env ${T_ENVIRONMENT})
  add_test(NAME ${T_NAME} COMMAND ${T_RUNNER} ${T_SCRIPT} ${T_ARGS})
  set(serial FALSE)
  if(T_RUN_SERIAL)
    set(serial TRUE)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
                       LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       SKIP_RETURN_CODE 77 RUN_SERIAL ${serial}
                       ENVIRONMENT "${env}")
endfunction()

macro(oq_include_test_groups)
  file(GLOB _oq_test_groups CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/*.cmake)
  list(SORT _oq_test_groups)
  foreach(_oq_g IN LISTS _oq_test_groups)
    include(${_oq_g})
  endforeach()
endmacro()

# ctest hides a skipped test's output, so a bare `ctest -R X` without the
# database would skip silently: ctest runs this before any test and says,
# once and loudly, why the database tests will skip and how to run one.
file(WRITE ${CMAKE_BINARY_DIR}/CTestCustom.cmake
     "set(CTEST_CUSTOM_PRE_TEST \"bash ${CMAKE_CURRENT_LIST_DIR}/../harness/no_dsn_note.sh\")\n")
