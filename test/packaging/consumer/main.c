/* consumer: prints the library's version and one error text; the test
 * compares them with the header's. */
#include <onceq/onceq.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
  printf("%s %s %s\n", oq_version(), ONCEQ_VERSION,
         oq_strerror(OQ_ERR_CLAIM_LOST));
  return strcmp(oq_version(), ONCEQ_VERSION) == 0 ? 0 : 1;
}
