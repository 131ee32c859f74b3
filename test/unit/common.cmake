# common/ (onceq_common): what the daemons and the CLI share. No database.
if(TARGET onceq_common)
  oq_add_test(unit_lib_common_mask LABEL unit SOURCES common_mask.c)
  target_link_libraries(unit_lib_common_mask PRIVATE onceq_common)
endif()
