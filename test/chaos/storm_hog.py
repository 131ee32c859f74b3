#!/usr/bin/env python3
"""storm_hog.py DSN SECONDS: idle sessions that take every free connection
slot of a server, and each one that frees up, for SECONDS; then close them
all at once (test/harness/oq_storm.sh, oq_storm_exhaust). Prints "full at
N" once the server refuses a connection for want of slots, "holding N at
the end", and "released at_ms=EPOCH_MS". Bounded by SECONDS; connect
attempts time out after 2 s."""
import sys
import time

import psycopg

dsn, secs = sys.argv[1], float(sys.argv[2])
held, full, end = [], False, time.time() + secs
while time.time() < end:
    try:
        held.append(psycopg.connect(dsn, connect_timeout=2, autocommit=True))
        continue
    except psycopg.OperationalError as e:
        msg = str(e)
        if "too many" not in msg and "remaining connection slots" not in msg:
            print("connect failed: %s" % msg.strip(), flush=True)
        elif not full:
            full = True
            print("full at %d" % len(held), flush=True)
    time.sleep(0.02)
print("holding %d at the end" % len(held), flush=True)
for c in held:
    c.close()
print("released at_ms=%d" % int(time.time() * 1000), flush=True)
