"""status_dom.py DOM.html EXPECT.json: check the status page's rendered DOM
(chromium --dump-dom) against the expected numbers and the escaping rules.

EXPECT: {"queues": {name: {"ready": n, "delayed": n, "claimed": n,
"dead": n}}, "ids": {element id: text}, "texts": [text that must appear
as text], "sessions": n, "parts": n}. Prints one line per check; exit 1
on the first mismatch (both sides printed)."""
import json
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []  # every start tag name
        self.stack = []  # (tag, attrs) open elements
        self.by_id = {}  # id -> text
        self.queue_cells = {}  # queue -> {class: text}
        self.sessions = 0
        self.parts = 0
        self.text = []
        self.cur_queue = None
        self.cell_class = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "tr" and "data-queue" in a:
            self.cur_queue = a["data-queue"]
            self.queue_cells[self.cur_queue] = {}
        if tag == "tr" and a.get("class") == "session":
            self.sessions += 1
        if tag == "span" and "p" in (a.get("class") or "").split():
            self.parts += 1
        if tag == "td" and self.cur_queue is not None:
            self.cell_class = (a.get("class") or "").split()
        self.stack.append((tag, a, len(self.text)))

    def handle_endtag(self, tag):
        while self.stack:
            t, a, start = self.stack.pop()
            body = "".join(self.text[start:]).strip()
            if "id" in a:
                self.by_id[a["id"]] = body
            if t == "td" and self.cur_queue is not None and self.cell_class:
                for c in self.cell_class:
                    self.queue_cells[self.cur_queue][c] = body
                self.cell_class = None
            if t == "tr":
                self.cur_queue = None
            if t == tag:
                break

    def handle_data(self, data):
        self.text.append(data)


def main():
    dom = open(sys.argv[1], encoding="utf-8").read()
    want = json.load(open(sys.argv[2], encoding="utf-8"))
    p = Page()
    p.feed(dom)
    bad = []

    def check(what, got, exp):
        ok = got == exp
        print(("ok" if ok else "MISMATCH") + f": {what}: got {got!r}, want {exp!r}")
        if not ok:
            bad.append(what)

    for q, cols in want["queues"].items():
        cells = p.queue_cells.get(q)
        check(f"queue {q} row present", cells is not None, True)
        for col, n in cols.items():
            check(f"queue {q} {col}", (cells or {}).get(col), str(n))
    for el, text in want["ids"].items():
        check(f"#{el}", p.by_id.get(el), text)
    check("session rows", p.sessions, want["sessions"])
    check("partition cells", p.parts, want["parts"])
    alltext = "".join(p.text)
    for t in want["texts"]:
        check(f"text {t!r} shown as text", t in alltext, True)
    # markup from the database never became elements
    for tag in ("script", "img", "i", "b", "iframe"):
        check(f"no <{tag}> element", tag in p.tags, False)
    sys.exit(1 if bad else 0)


main()
