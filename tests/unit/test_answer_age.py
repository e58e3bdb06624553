"""An answer says how old it is in its body (docs/serving.md, "The deadline model"): a client
whose deadline ends before the scrape in progress gets the last complete answer, and
Prometheus ignores the `Age` header, so the body must carry when its machine was read
(`storpath_scrape_collected_timestamp_seconds`), the same in that answer as when it was new."""

from __future__ import annotations

import os
import re
import threading
import time

from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import StorpathExporter, build_collectors
from storpath.http.scrape import Scraper
from storpath.http.server import App, Site
from storpath.base.roots import Roots
from tests.fixtures import machines

COLLECTED = re.compile(rb"^storpath_scrape_collected_timestamp_seconds (\S+)$", re.M)


def _get(app, timeout: str):
    got = {}
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS": timeout}
    body = b"".join(app(environ, lambda status, headers: got.update(status=status, headers=dict(headers))))
    return got["status"], got["headers"], body


def _collected(body: bytes) -> float:
    found = COLLECTED.findall(body)
    assert len(found) == 1, body[-2000:]
    return float(found[0])


def test_a_hasty_client_after_a_fault_gets_a_body_that_says_the_answers_age(tmp_path):
    machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    roots = Roots(sysfs=os.path.join(tmp_path, "sys"), procfs=os.path.join(tmp_path, "proc"),
                  dev=os.path.join(tmp_path, "dev"), captured=os.path.join(tmp_path, "captured"))
    exporter = StorpathExporter(build_collectors(roots, validate({}, {}), Scheduler()))
    # The fault: from the second scrape on, the reading hangs (a device that stopped answering,
    # a host under load) until the gate opens.
    gate, take, calls = threading.Event(), exporter.snapshotter.take, []

    def hanging_take(timeout):
        calls.append(timeout)
        if len(calls) > 1:
            gate.wait(30)
        return take(timeout)

    exporter.snapshotter.take = hanging_take
    app = App(Site(scraper=Scraper(exporter.collect, deadline=10.0), collector_names=[]))
    try:
        before = time.time()
        status, headers, fresh = _get(app, "10")
        assert status == "200 OK" and "Age" not in headers
        read_at = _collected(fresh)
        assert before <= read_at <= time.time()
        time.sleep(1.1)  # the next scrape comes later; its reading hangs
        status, headers, late = _get(app, "0.5")
        assert status == "200 OK" and int(headers["Age"]) >= 1
        # The body says when its machine was read: the first scrape's time, not this one's.
        assert _collected(late) == read_at
        assert time.time() - _collected(late) >= 1.0
        # A later hasty client too (OpenMetrics and gzip are made from the same flight).
        environ_late = _get(app, "0.2")
        assert _collected(environ_late[2]) == read_at
        gate.set()
        deadline = time.monotonic() + 20
        while app.site.scraper.busy() and time.monotonic() < deadline:
            time.sleep(0.05)
        status, _, fresh_again = _get(app, "10")  # the scrape that hung has landed: a new reading
        assert status == "200 OK" and _collected(fresh_again) > read_at
    finally:
        gate.set()
        exporter.close()
