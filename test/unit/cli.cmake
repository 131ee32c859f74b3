# cli/ (onceq): push's JSON check (cli/src/jsonline.c), compiled straight
# from cli/src. No database.
if(TARGET onceq_common)
  oq_add_test(unit_cli_jsonline LABEL unit
              SOURCES cli_jsonline.c ${PROJECT_SOURCE_DIR}/cli/src/jsonline.c)
  target_include_directories(unit_cli_jsonline PRIVATE
                             ${PROJECT_SOURCE_DIR}/cli/src)
  target_link_libraries(unit_cli_jsonline PRIVATE onceq_common)
endif()
