# The coordinator's status page (issue 11) in headless chromium against a
# known state; skips (77) without a database or chromium.
oq_add_script_test(NAME it_coord_status_page SCRIPT it_status_page.sh
                   LABELS integration TIMEOUT 180 NEEDS onceq)

# --keep-results retention of onceq_results.
oq_add_script_test(NAME it_coord_results_retention
                   SCRIPT it_results_retention.sh
                   LABELS integration TIMEOUT 90 NEEDS onceq)

# /healthz and /metrics under status-page load: 64 idle sockets, page
# loops, page builds stuck on a lock (issue 20, finding 6).
oq_add_script_test(NAME it_coord_health_load SCRIPT it_health_load.sh
                   LABELS integration TIMEOUT 120 NEEDS onceq)
# What the page, /api/dead and the dead-letter webhook show of a 1 MB
# payload is capped (issue 20, finding 7).
oq_add_script_test(NAME it_coord_payload_caps SCRIPT it_payload_caps.sh
                   LABELS integration TIMEOUT 90 NEEDS onceq)
