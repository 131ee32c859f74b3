#!/usr/bin/env bash
# it_status_page.sh: the coordinator's status page in a real browser.
# Known state: emails 3 ready + 1 claimed, reports 2 delayed, hooks 1 dead
# whose last error and payload carry <script> and markup, two worker
# sessions (one with a hostname holding markup) owning 4 partitions, the
# coordinator's own session. Debian's chromium (headless) loads the page;
# the rendered DOM must show the numbers, the markup as text and no
# element made from database text. Then a screenshot, the JSON endpoints
# (the CLI's --json shapes), the throughput (all queues, PostgreSQL's
# table counters), the bearer token by environment and by flag (401
# without it), a bare PORT bound to 127.0.0.1 only, the self-refresh and
# no reference to anything outside the page.
# Skips (77) without a database or without chromium.
source "$(dirname "$0")/../harness/oq_harness.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ] && [ -n "${ONCEQ_TEST_DSN:-}" ]; then
  echo "SKIP: no chromium (ONCEQ_APT_PACKAGES in test/run.sh installs it)" >&2
  exit 77
fi
oq_setup status_page

A=00000000-0000-4000-8000-00000000000a
B=00000000-0000-4000-8000-00000000000b
oq_sql "INSERT INTO onceq_sessions (id, expiry, hostname, pid, queues, partitioned)
        VALUES ('$A', interval '1 hour', '<i>evil</i>-host', 4001, 'emails', true),
               ('$B', interval '1 hour', 'worker-b', 4002, 'emails,hooks', true);
        INSERT INTO onceq_settings (key, value) VALUES ('partitions', '4');
        INSERT INTO onceq_session_parts (part, session_id)
        VALUES (0, '$A'), (1, '$A'), (2, '$B'), (3, '$B');
        INSERT INTO onceq_items (queue, payload)
          SELECT 'emails', '{\"n\": 1}' FROM generate_series(1, 3);
        INSERT INTO onceq_items (queue, payload, claim, claimed_at, attempts)
          VALUES ('emails', '{\"n\": 9}', '$A', now(), 1);
        INSERT INTO onceq_items (queue, run_at)
          SELECT 'reports', now() + interval '1 hour' FROM generate_series(1, 2);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
          max_attempts, last_error, created_at)
        VALUES (gen_random_uuid(), 'hooks',
          '{\"p\": \"<img src=x onerror=alert(2)>\"}', 0, 3, 3,
          'exit status 1: <script>alert(1)</script> & <b>bold</b>', now())" >/dev/null

oq_coordinator coord --metrics-addr 127.0.0.1:0 --interval 200ms
cpid=$OQ_LAST_PID
oq_wait_until 15 "the coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/coord.log"
port=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/coord.log" | head -1)
oq_wait_until 15 "the coordinator leads" oq_sql_is \
  "SELECT count(*) FROM onceq_leases" 1
url="http://127.0.0.1:$port/"
oq_log "page at $url"

# the browser: DOM after rendering, and a screenshot
chrome() {
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --hide-scrollbars --user-data-dir="$OQ_TMP/chrome" "$@" 2>>"$OQ_TMP/chrome.log"
}
t0=$(oq_now_ms)
chrome --dump-dom "$url" >"$OQ_TMP/dom.html" || oq_fail "chromium --dump-dom failed"
oq_log "chromium rendered the DOM in $(($(oq_now_ms) - t0)) ms"
cat >"$OQ_TMP/expect.json" <<'JSON'
{"queues": {"emails": {"ready": 3, "delayed": 0, "claimed": 1, "dead": 0},
            "reports": {"ready": 0, "delayed": 2, "claimed": 0, "dead": 0},
            "hooks": {"ready": 0, "delayed": 0, "claimed": 0, "dead": 1}},
 "ids": {"total-ready": "3", "total-claimed": "1", "total-dead": "1",
         "workers": "2", "queues-count": "3", "parts-count": "4",
         "parts-unowned": "0"},
 "sessions": 3, "parts": 4,
 "texts": ["exit status 1: <script>alert(1)</script> & <b>bold</b>",
           "<img src=x onerror=alert(2)>", "<i>evil</i>-host", "worker-b"]}
JSON
oq_py "$(dirname "$0")/status_dom.py" "$OQ_TMP/dom.html" "$OQ_TMP/expect.json" ||
  oq_fail "the rendered page does not match (see above)"
shot=${ONCEQ_STATUS_SCREENSHOT:-$OQ_TMP/status.png}
chrome --window-size=1280,1000 --screenshot="$shot" "$url" >/dev/null ||
  oq_fail "chromium --screenshot failed"
[ -s "$shot" ] || oq_fail "no screenshot at $shot"
oq_log "ok: screenshot $shot ($(stat -c %s "$shot") bytes)"

# the raw HTML: security headers, no script, escaped database text
curl -s -D "$OQ_TMP/h.txt" -o "$OQ_TMP/page.html" "$url"
oq_contains "content security policy" "$(cat "$OQ_TMP/h.txt")" \
  "Content-Security-Policy: default-src 'none'"
oq_check "no <script in the HTML" "$(grep -c '<script' "$OQ_TMP/page.html" || true)" 0
oq_contains "escaped error" "$(cat "$OQ_TMP/page.html")" \
  '&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;'

# JSON endpoints: the CLI's --json shapes (same keys)
keys() { oq_py -c 'import json,sys
d=json.load(open(sys.argv[1]))
def walk(v, p):
    if isinstance(v, dict):
        for k in sorted(v): yield p + "." + k; yield from walk(v[k], p + "." + k)
    elif isinstance(v, list) and v: yield from walk(v[0], p + "[]")
print("\n".join(sorted(set(walk(d, "")))))' "$1"; }
for pair in "stats|stats --sample 0s" "sessions|sessions" "parts|parts" \
  "dead|list --state dead"; do
  ep=${pair%%|*}
  cmd=${pair#*|}
  curl -s -o "$OQ_TMP/api_$ep.json" "http://127.0.0.1:$port/api/$ep"
  # shellcheck disable=SC2086 # cmd is words
  "$ONCEQ_CLI" --db "$OQ_DSN" --json $cmd >"$OQ_TMP/cli_$ep.json"
  oq_check "/api/$ep has the keys of onceq $cmd --json" \
    "$(keys "$OQ_TMP/api_$ep.json" | tr '\n' ' ')" \
    "$(keys "$OQ_TMP/cli_$ep.json" | tr '\n' ' ')"
done
oq_check "/api/dead last_error" \
  "$(oq_py -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["last_error"])' "$OQ_TMP/api_dead.json")" \
  'exit status 1: <script>alert(1)</script> & <b>bold</b>'
oq_check "unknown path" "$(curl -s -o /dev/null -w '%{http_code}' "${url}nope")" 404

# throughput without history: PostgreSQL's table counters, all queues,
# against the oldest sample the page kept (the first load above): 30
# arrivals and 12 completions since. A backend's counters reach the
# statistics when it exits, a moment after psql does, hence the polling.
oq_sql "INSERT INTO onceq_items (queue) SELECT 'tp' FROM generate_series(1, 30)" >/dev/null
oq_sql "DELETE FROM onceq_items WHERE id IN
          (SELECT id FROM onceq_items WHERE queue = 'tp' LIMIT 12)" >/dev/null
since_first() { # KEY: the /api/stats total's KEY rate times its window
  oq_py -c 'import json,sys
t=json.load(open(sys.argv[1]))["total"]
r=t[sys.argv[2]]
print("none" if r is None else round(r * t["window_s"] / 60))' "$OQ_TMP/rates.json" "$1"
}
rates_seen() {
  curl -s -o "$OQ_TMP/rates.json" "http://127.0.0.1:$port/api/stats" &&
    [ "$(since_first in_per_min)" = 30 ] && [ "$(since_first done_per_min)" = 12 ]
}
oq_wait_until 15 "/api/stats counts 30 arrivals and 12 completions" rates_seen
oq_check "rates source" "$(oq_jget "$OQ_TMP/rates.json" 'd["total"]["in_source"]')" pg_stat
chrome --dump-dom "$url" >"$OQ_TMP/dom2.html" || oq_fail "chromium --dump-dom failed"
oq_py - "$OQ_TMP/dom2.html" <<'EOF' || oq_fail "the page shows no throughput (see above)"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
def text(el):
    m = re.search(r'id="%s"[^>]*>([^<]*)<' % el, dom)
    return m.group(1) if m else None
got = {el: text(el) for el in ("total-in", "total-done", "rate-window")}
print(got)
ok = all(got.values()) and got["total-in"] != "-" and got["total-done"] != "-" \
    and "table counters" in got["rate-window"]
sys.exit(0 if ok else 1)
EOF
oq_log "ok: the all-queues row shows the throughput"

# a token: 401 without it (or a wrong one), 200 with it
ONCEQ_STATUS_TOKEN=s3cret oq_coordinator tok --metrics-addr 127.0.0.1:0 \
  --interval 200ms
oq_wait_until 15 "the second coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/tok.log"
tport=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/tok.log" | head -1)
oq_check "no token" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$tport/")" 401
oq_check "wrong token" "$(curl -s -o /dev/null -w '%{http_code}' \
  -H 'Authorization: Bearer nope' "http://127.0.0.1:$tport/api/stats")" 401
oq_check "right token" "$(curl -s -o /dev/null -w '%{http_code}' \
  -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$tport/api/stats")" 200
oq_check "/metrics stays open" "$(curl -s -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$tport/metrics")" 200

# the token by flag, and a bare PORT: listening on 127.0.0.1 alone (the
# kernel's socket table: no IPv4 or IPv6 wildcard), the token masked in
# the process's arguments
oq_coordinator flag --metrics-addr 0 --interval 200ms --status-token fl4gt0k
fpid=$OQ_LAST_PID
oq_wait_until 15 "the third coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/flag.log"
fport=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/flag.log" | head -1)
listeners() { # the local addresses listening on port $1 (hex, /proc/net)
  awk -v p="$(printf ':%04X' "$1")" \
    '$4 == "0A" && substr($2, length($2) - 4) == p {print $2}' \
    /proc/net/tcp /proc/net/tcp6
}
oq_check "a bare PORT listens on 127.0.0.1 only" "$(listeners "$fport")" \
  "$(printf '0100007F:%04X' "$fport")"
oq_check "flag token: none" "$(curl -s -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$fport/")" 401
oq_check "flag token: right" "$(curl -s -o /dev/null -w '%{http_code}' \
  -H 'Authorization: Bearer fl4gt0k' "http://127.0.0.1:$fport/")" 200
oq_check "the flag's token is not in ps" \
  "$(tr '\0' ' ' <"/proc/$fpid/cmdline" | grep -c fl4gt0k || true)" 0
# the page refreshes itself, and names nothing to load from anywhere
oq_contains "refreshes itself" "$(cat "$OQ_TMP/page.html")" \
  '<meta http-equiv="refresh" content="5">'
oq_py - "$OQ_TMP/page.html" <<'EOF' || oq_fail "the page loads something"
import sys
from html.parser import HTMLParser
class P(HTMLParser):
    bad, style = [], False
    def handle_starttag(self, tag, attrs):
        self.bad += [(tag, k) for k, _ in attrs if k in ("src", "href", "srcset")]
        self.bad += [tag] if tag in ("link", "script", "iframe", "object") else []
        self.style = tag == "style"
    def handle_endtag(self, tag):
        self.style = False
    def handle_data(self, data):
        if self.style and ("url(" in data or "@import" in data):
            self.bad.append("css " + data[:40])
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
print("external references:", p.bad or "none")
sys.exit(1 if p.bad else 0)
EOF
oq_alive "$cpid" || oq_fail "the coordinator died"
oq_log "PASS"
