/* version.c: the library's version string. */
#include "onceq/onceq.h"

const char *oq_version(void)
{
  return ONCEQ_LIB_VERSION;
}
