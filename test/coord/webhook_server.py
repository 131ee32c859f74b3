#!/usr/bin/env python3
"""webhook_server.py: the dead-job webhook receiver for it_webhook.sh.

Listens on 127.0.0.1 (port 0: the kernel picks one, written to PORT_FILE),
and answers each POST:
  - 500 to the first FAIL_FIRST requests (a receiver that is down);
  - 422 when the item's payload has "reject": true (a permanent rejection);
  - 200 otherwise.
With DELAY (seconds, default 0), each answer waits that long first (a
slow receiver). Every request is appended to LOG_FILE as one JSON line: the status sent,
the Idempotency-Key header, the body (parsed) and the Content-Type.

usage: webhook_server.py PORT_FILE LOG_FILE FAIL_FIRST [DELAY]
Standard library only; stops on SIGTERM.
"""
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT_FILE, LOG_FILE, FAIL_FIRST = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = threading.Lock()
DELAY = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
served = [0]


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        if DELAY > 0:
            time.sleep(DELAY)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with lock:
            served[0] += 1
            if served[0] <= FAIL_FIRST:
                status = 500
            elif isinstance(body, dict) and isinstance(body.get("payload"), dict) \
                    and body["payload"].get("reject"):
                status = 422
            else:
                status = 200
            with open(LOG_FILE, "a") as f:
                f.write(json.dumps({
                    "status": status,
                    "key": self.headers.get("Idempotency-Key"),
                    "content_type": self.headers.get("Content-Type"),
                    "body": body,
                }) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt, *args):  # quiet
        pass


def main():
    srv = HTTPServer(("127.0.0.1", 0), Hook)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(
        target=srv.shutdown, daemon=True).start())
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    srv.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
