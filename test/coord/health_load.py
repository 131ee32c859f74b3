#!/usr/bin/env python3
"""health_load.py: /healthz and /metrics under status-page load, for
it_health_load.sh.

usage: health_load.py PORT TOKEN PHASE
  PHASE idle: hold 64 idle sockets (from 127.0.0.2, another client, as
        another pod would be) and loop `GET /` (with the bearer token) from
        a second client, while 20 probes of /healthz and /metrics from
        127.0.0.1 must each answer 200 within 1 s;
  PHASE bare: the idle sockets and the probes only (the worker's server,
        which has no page);
  PHASE slow: the same probes while the page builds are stuck (the caller
        holds a lock the page's queries wait on): /healthz must not wait
        for them.
Prints one line per failed probe and a summary; exit 0 when every probe
answered in time. Standard library only; every loop is bounded.
"""
import http.client
import socket
import sys
import threading
import time

PORT, TOKEN, PHASE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
IDLE = 64
PROBES = 20
stop = threading.Event()
pages = {"ok": 0, "other": 0, "error": 0}


def idle_sockets():
    """64 connections that send nothing; the server may drop some (its
    per-client limit): that is its right, and not a failure."""
    held = []
    for _ in range(IDLE):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", PORT))
            held.append(s)
        except OSError:
            s.close()
    return held


def page_loop():
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5,
                                           source_address=("127.0.0.3", 0))
            c.request("GET", "/", headers={"Authorization": "Bearer " + TOKEN})
            r = c.getresponse()
            r.read()
            pages["ok" if r.status == 200 else "other"] += 1
            c.close()
        except OSError:
            pages["error"] += 1
            time.sleep(0.05)


def probe(path):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1.0)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, time.monotonic() - t0, body[:40]
    except OSError as e:
        return None, time.monotonic() - t0, repr(e)


def main():
    held = idle_sockets() if PHASE in ("idle", "bare") else []
    nloops = {"idle": 2, "slow": 1}.get(PHASE, 0)
    loops = [threading.Thread(target=page_loop, daemon=True)
             for _ in range(nloops)]
    for t in loops:
        t.start()
    time.sleep(0.3)
    bad = 0
    worst = 0.0
    for i in range(PROBES):
        for path in ("/healthz", "/metrics"):
            status, took, body = probe(path)
            worst = max(worst, took)
            if status != 200 or took > 1.0:
                bad += 1
                print("probe %d %s: status %s after %.2f s (%s)"
                      % (i, path, status, took, body))
        time.sleep(0.1)
    stop.set()
    for t in loops:
        t.join(10)
    alive = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1) != b"":
                alive += 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
        s.close()
    print("phase=%s idle_held=%d idle_open_at_end=%d pages=%s bad=%d "
          "worst=%.3f" % (PHASE, len(held), alive, pages, bad, worst))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
