"""The runbooks the exporter serves at /runbooks/ (storpath.http.runbooks): every runbook of
docs/runbooks/ as it is there, the list, nothing else; no path reaches outside the folder; the
landing page and the shipped rules link there by default, and a site's base overrides both."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest
from prometheus_client.core import GaugeMetricFamily

from storpath.base.config import DEFAULTS
from storpath.http import runbooks
from storpath.http.scrape import Scraper
from storpath.http.server import App, Site
from tests.conftest import ROOT

DOCS = os.path.join(ROOT, "docs", "runbooks")


def _app() -> App:
    return App(Site(scraper=Scraper(lambda timeout: [GaugeMetricFamily("storpath_t", "T.", value=1)]),
                    collector_names=["pcie"]))


def _get(app, path, method="GET"):
    got = {}
    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path},
                        lambda status, headers: got.update(status=status, headers=dict(headers))))
    return got["status"], got["headers"], body


def test_the_package_holds_every_runbook_of_docs():
    documents = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
    assert runbooks.listed() == documents and len(documents) > 60
    # one folder, not a copy to keep in step: the package's folder is docs/runbooks in a checkout
    assert os.path.realpath(runbooks.FOLDER) == os.path.realpath(DOCS)


def test_every_runbook_is_served_as_it_is_in_docs():
    app = _app()
    for name in runbooks.listed():
        status, headers, body = _get(app, f"/runbooks/{name}")
        assert status == "200 OK", name
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
        assert headers["X-Content-Type-Options"] == "nosniff"
        with open(os.path.join(DOCS, name), "rb") as handle:
            assert body == handle.read(), name
    assert _get(app, "/runbooks/PcieLinkDown.md", "HEAD")[2] == b""


def test_the_list_links_every_runbook():
    status, headers, body = _get(_app(), "/runbooks/")
    assert status == "200 OK" and headers["Content-Type"].startswith("text/html")
    assert re.findall(rb'href="([A-Za-z0-9]+\.md)"', body) == [name.encode() for name in runbooks.listed()]
    status, headers, _ = _get(_app(), "/runbooks")
    assert status.startswith("301") and headers["Location"] == "runbooks/"


@pytest.mark.parametrize("path", [
    "/runbooks/../README.md", "/runbooks/..", "/runbooks/../../etc/passwd", "/runbooks//etc/passwd",
    "/runbooks/%2e%2e/README.md", "/runbooks/PcieLinkDown", "/runbooks/PcieLinkDown.md/",
    "/runbooks/PcieLinkDown.md.bak", "/runbooks/pcieLinkDown.md", "/runbooks/NoSuchAlert.md",
    "/runbooks/Pcie\x00LinkDown.md", "/runbooks/sub/PcieLinkDown.md", "/runbooks/.PcieLinkDown.md",
    "/runbooks/PcieLinkDown.md\n", "/runbooksX", "/runbooks/" + "A" * 5000 + ".md",
])
def test_nothing_outside_the_runbooks_is_named(path):
    status, _, body = _get(_app(), path)
    assert status.startswith("404"), (path, status)
    assert b"root:" not in body and b"# storpath" not in body


def test_a_link_or_a_folder_planted_in_the_folder_is_not_followed(tmp_path, monkeypatch):
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "Real.md").write_text("# Real\n")
    secret = tmp_path / "secret"
    secret.write_text("root:x:0:0\n")
    (folder / "Planted.md").symlink_to(secret)
    (folder / "Folder.md").mkdir()
    monkeypatch.setattr(runbooks, "FOLDER", str(folder))
    app = _app()
    assert _get(app, "/runbooks/Real.md")[2] == b"# Real\n"
    for name in ("Planted.md", "Folder.md"):
        status, _, body = _get(app, f"/runbooks/{name}")
        assert status.startswith("404") and b"root:" not in body, name


def test_a_missing_folder_lists_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(runbooks, "FOLDER", str(tmp_path / "gone"))
    assert _get(_app(), "/runbooks/")[0] == "200 OK"
    assert _get(_app(), "/runbooks/PcieLinkDown.md")[0].startswith("404")


def test_the_landing_page_links_the_exporters_own_runbooks():
    assert DEFAULTS["web"]["runbook_url_base"] == "runbooks/"  # relative to the page at /
    from storpath.http import landing

    assert set(landing.RUNBOOKS.values()) <= {name[:-3] for name in runbooks.listed()}


def _rules_generator():
    spec = importlib.util.spec_from_file_location("rules_generate", os.path.join(ROOT, "rules", "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_alert_links_the_exporters_runbooks_by_default_and_a_site_base_overrides():
    generate = _rules_generator()
    default, site = generate.load_config(), generate.load_config()
    site["runbook_url_base"] = "https://wiki.example.com/storage/"
    served = {name[:-3] for name in runbooks.listed()}
    for config, expect in ((default, "/runbooks/"), (site, "https://wiki.example.com/storage/")):
        alerts = [rule for doc in generate.render(config).values() for group in doc["groups"]
                  for rule in group["rules"] if "alert" in rule]
        assert len(alerts) > 60
        for rule in alerts:
            url = rule["annotations"]["runbook_url"]
            assert url.endswith(f"{rule['alert']}.md") and rule["alert"] in served, url
            assert expect in url, url
            if config is default:
                assert "$labels.instance" in url and url.split("}}")[-1] == f"/runbooks/{rule['alert']}.md"
