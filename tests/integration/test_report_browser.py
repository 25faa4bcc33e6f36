"""The HTML report in a real headless Chromium (issue 30, item 4), driven by selenium through
Debian's chromedriver: the page loads from the file alone, with no console error; its plots are
loaded images of real size; the regression rows are there and coloured; a hostile payload
variable shows as text in the run's provenance; and a screenshot is taken (kept beside the page,
checked to be a real, non-blank image)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from report_runs import HOSTILE, series

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1600"):
        options.add_argument(arg)  # --no-sandbox: the tests run as root
    real = "/usr/lib/chromium/chromium"  # Debian's binary behind its /usr/bin/chromium wrapper script
    options.binary_location = real if os.path.exists(real) else shutil.which("chromium")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield driver
    driver.quit()


def test_the_report_in_chromium(tmp_path, browser):
    from selenium.webdriver.common.by import By

    page = tmp_path / "report.html"
    res = subprocess.run([sys.executable, "-m", "hpcai", "results", "report", str(series(tmp_path / "runs")),
                          "-o", str(page)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    browser.get(page.as_uri())
    assert browser.title == "hpcai results report"
    assert browser.find_element(By.TAG_NAME, "h1").text == "hpcai results report"

    plots = browser.find_elements(By.CSS_SELECTOR, "img.plot")
    assert len(plots) == 2
    for img in plots:  # decoded, and drawn at a readable size
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) > 400
        assert img.size["width"] > 400 and img.size["height"] > 150

    rows = browser.find_elements(By.CSS_SELECTOR, "tr.regression")
    assert len(rows) == 5
    colour = browser.execute_script("return getComputedStyle(arguments[0].cells[0]).backgroundColor", rows[1])
    assert colour == "rgb(253, 226, 226)"
    assert "0.791 – 0.809" in rows[0].text or "0.8" in rows[0].text

    osu = [d for d in browser.find_elements(By.CSS_SELECTOR, "details.provenance") if "osu0" in d.text]
    osu[0].find_element(By.TAG_NAME, "summary").click()
    assert f"note={HOSTILE}" in osu[0].text  # shown as text, not run
    assert browser.execute_script("return document.scripts.length") == 0

    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000 and pixels.std() > 0.05  # a page, not blank

    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
