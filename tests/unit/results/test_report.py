"""`hpcai results report` (issue 30, item 4), read as HTML: the regression between two images is
marked and listed, one plot per payload (an axis per metric), every record's text escaped, the
page self-contained. The same page in a real headless Chromium: tests/integration/test_report_browser.py."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser

from report_runs import HOSTILE, series

from hpcai.results import report
from hpcai.results.loading import load_all


class Page(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def count(self, tag: str, **attrs) -> int:
        return sum(1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items()))


def test_a_regression_on_the_new_image_is_marked_and_listed(tmp_path):
    text, regressions = report.render(load_all([series(tmp_path / "runs")]))
    [found] = regressions
    assert found.payload == "ddp-bench" and found.metric == "examples_per_sec"
    assert found.change.ratio == 0.8 and found.change.high < 0.95
    page = Page(text)
    assert page.count("tr", **{"class": "regression"}) == 1 + 4  # the list, and the new image's 4 rows
    assert page.count("img", **{"class": "plot"}) == 2  # one per payload: ddp-bench and osu
    assert all(a["src"].startswith("data:image/svg+xml;base64,") for t, a in page.tags if t == "img")
    assert page.count("script") == 0 and page.count("link") == 0  # self-contained, nothing runs
    assert page.count("details", **{"class": "provenance"}) == 11


def test_record_text_is_escaped(tmp_path):
    text, _ = report.render(load_all([series(tmp_path / "runs")]))
    assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_same_performance_on_a_new_image_is_no_regression(tmp_path):
    text, regressions = report.render(load_all([series(tmp_path / "runs", regress=False)]))
    assert regressions == [] and 'id="no-regressions"' in text and Page(text).count("tr", **{"class": "regression"}) == 0


def test_the_cli_writes_the_page_and_refuses_what_is_not_html(tmp_path):
    runs = series(tmp_path / "runs")
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "report", str(runs), "-o",
                          str(tmp_path / "r.html")], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr.strip().endswith("(1 regression marked)"), res.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "report", str(runs), "-o",
                          str(tmp_path / "r.png")], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr == "error: report output must end in .html, got 'r.png'\n"
    (tmp_path / "link.html").symlink_to(tmp_path / "elsewhere.html")
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "report", str(runs), "-o",
                          str(tmp_path / "link.html")], capture_output=True, text=True)
    assert res.returncode == 2 and not (tmp_path / "elsewhere.html").exists()


def test_the_history_as_the_source(tmp_path):
    runs = series(tmp_path / "runs")
    db = str(tmp_path / "h.sqlite")
    assert subprocess.run([sys.executable, "-m", "hpcai", "results", "index", str(runs), "--db", db]).returncode == 0
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "report", "--history", "ddp-bench", "--db", db,
                          "-o", str(tmp_path / "h.html")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    page = Page((tmp_path / "h.html").read_text())
    assert page.count("img", **{"class": "plot"}) == 1  # ddp-bench only
