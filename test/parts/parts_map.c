/*
 * parts_map.c: the slot -> part mapping and the block arithmetic, for
 * every P in 1..1024 and 1..70 members (no database):
 *  - part_of(slot) = slot * P / 1024 is monotonic and onto [0, P);
 *  - oq_parts_slots gives exactly the slots that map to the parts, and a
 *    run of parts is one contiguous slot range;
 *  - the members' blocks are disjoint, contiguous, in order and cover
 *    [0, P); sizes differ by at most one; with more members than parts the
 *    extra blocks are empty.
 */
#include "oq_test.h"

int main(void)
{
  for (int p = 1; p <= OQ_PARTS_MAX; p++) {
    int prev = 0;
    for (int s = 0; s < OQ_PARTS_SLOTS; s++) {
      int part = oq_parts_of_slot(s, p);
      ASSERT(part >= prev && part <= prev + 1); /* monotonic, no gaps */
      ASSERT(part < p);
      prev = part;
    }
    ASSERT_EQ(oq_parts_of_slot(0, p), 0);
    ASSERT_EQ(oq_parts_of_slot(OQ_PARTS_SLOTS - 1, p), p - 1);
    int next_slot = 0;
    for (int part = 0; part < p; part++) {
      int lo, hi;
      oq_parts_slots(part, part + 1, p, &lo, &hi);
      ASSERT_EQ(lo, next_slot); /* contiguous */
      ASSERT(hi > lo);          /* every part has slots when P <= 1024 */
      for (int s = lo; s < hi; s++)
        ASSERT_EQ(oq_parts_of_slot(s, p), part);
      next_slot = hi;
    }
    ASSERT_EQ(next_slot, OQ_PARTS_SLOTS);
    for (int k = 1; k <= 70; k++) {
      int next = 0, minsz = OQ_PARTS_MAX + 1, maxsz = -1;
      for (int i = 0; i < k; i++) {
        int lo, hi;
        oq_parts_block(i, k, p, &lo, &hi);
        ASSERT_EQ(lo, next);
        ASSERT(hi >= lo);
        if (hi - lo < minsz)
          minsz = hi - lo;
        if (hi - lo > maxsz)
          maxsz = hi - lo;
        /* a block of parts is one slot range */
        int slo, shi, a, b;
        oq_parts_slots(lo, hi, p, &slo, &shi);
        if (hi > lo) {
          oq_parts_slots(lo, lo + 1, p, &a, &b);
          ASSERT_EQ(slo, a);
          oq_parts_slots(hi - 1, hi, p, &a, &b);
          ASSERT_EQ(shi, b);
        } else {
          ASSERT_EQ(slo, shi);
        }
        next = hi;
      }
      ASSERT_EQ(next, p);
      ASSERT_LE(maxsz - minsz, 1);
      if (k > p)
        ASSERT_EQ(minsz, 0);
    }
  }
  int lo, hi;
  oq_parts_block(3, 3, 12, &lo, &hi); /* not a member: empty */
  ASSERT_EQ(hi - lo, 0);
  oq_parts_block(-1, 3, 12, &lo, &hi);
  ASSERT_EQ(hi - lo, 0);
  oq_parts_block(1, 3, 12, &lo, &hi);
  ASSERT_EQ(lo, 4);
  ASSERT_EQ(hi, 8);
  printf("PASS parts_map\n");
  return 0;
}
