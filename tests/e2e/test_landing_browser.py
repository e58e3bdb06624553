"""The landing page in a real browser: Debian's headless Chromium driven through its
chromedriver (selenium). Two fixture machines, each scraped once and then loaded: the
faulty hop's element carries the below-expected class and is visible, the browser logs
no console error, and a full-page screenshot is written to $STORPATH_ARTIFACTS (else
.artifacts/ in the repository, which git ignores): artifacts, never committed."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from storpath.http.landing import _dom_id
from tests.conftest import IN_CI, ROOT

ARTIFACTS = os.environ.get("STORPATH_ARTIFACTS") or os.path.join(ROOT, ".artifacts")

# (machine, variant, the device end of the link that trained low)
FAULTY = [("intel-r2224wft-switches", "uplink-x4", "0000:d8:00.0"),
          ("am4-x570-firecuda", "x2-link", "0000:05:00.0")]


def _missing(what: str):
    message = f"{what}: install Debian's chromium and chromium-driver (scripts/setup-system) and selenium (test extra)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium not importable")
    driver_path, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    if not driver_path or not chromium:
        _missing("chromedriver or chromium not found")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,900",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.parametrize("name,variant,faulty", FAULTY, ids=[f"{n}:{v}" for n, v, _ in FAULTY])
def test_landing_page_shows_the_faulty_hop(name, variant, faulty, browser, exporter_on):
    from selenium.webdriver.common.by import By

    with exporter_on(name, variant) as exporter:
        browser.get(exporter.url + "/")
        assert browser.find_element(By.ID, "no-scrape").is_displayed()  # nothing scraped yet: said so
        assert exporter.get("/metrics").status_code == 200
        browser.get(exporter.url + "/")
        hop = browser.find_element(By.ID, _dom_id(faulty))
        classes = hop.get_attribute("class").split()
        assert "below-expected" in classes, classes
        assert hop.is_displayed()
        assert "below expected" in hop.text and "WARNING" in hop.text, hop.text  # the alerts' severity
        assert browser.find_element(By.ID, "metrics").get_attribute("href") == exporter.url + "/metrics"
        assert browser.find_element(By.ID, "runbooks").get_attribute("href") == exporter.url + "/runbooks/"
        runbook = hop.find_element(By.CSS_SELECTOR, ".finding a").get_attribute("href")
        assert runbook == exporter.url + "/runbooks/PcieLinkWidthBelowExpected.md", runbook  # its own copy
        healthy = browser.find_elements(By.CSS_SELECTOR, ".node.pci.healthy")
        assert healthy and all(h.is_displayed() for h in healthy)
        errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
        os.makedirs(ARTIFACTS, exist_ok=True)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1200, max(900, int(height) + 40))
        path = os.path.join(ARTIFACTS, f"landing-{name}-{variant}.png")
        assert browser.save_screenshot(path)
        assert os.path.getsize(path) > 10_000
        # the finding's runbook opens: the exporter's own copy of docs/runbooks/. Last, and its log
        # taken away: a text page has no icon of its own, so Chromium asks for /favicon.ico (a 404).
        browser.get(runbook)
        assert browser.find_element(By.TAG_NAME, "body").text.startswith("# PcieLinkWidthBelowExpected")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("favicon.ico" in e["message"] for e in browser.get_log("browser")):
            time.sleep(0.1)
