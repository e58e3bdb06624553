"""A real Prometheus (Debian's 2.42, a local process) stores how old each answer is. A host whose
every scrape outlasts Prometheus' scrape timeout (md0's array_state a FIFO: the md source reads
until the server's deadline on every scrape) is answered with the last complete answer, as
docs/serving.md says; Prometheus ignores the `Age` header, so before the answer's body said so
nothing it stored told that its samples were read for an earlier scrape. Now
`timestamp(storpath_scrape_collected_timestamp_seconds) - storpath_scrape_collected_timestamp_seconds`
is that age (StorpathAnswersStale's expression)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import run_exporter

from . import harness

AGE = "timestamp(storpath_scrape_collected_timestamp_seconds) - storpath_scrape_collected_timestamp_seconds"


@pytest.fixture
def prometheus_processes(process_binaries, tmp_path_factory):
    backend = harness.ProcessBackend(tmp_path_factory.mktemp("processes"))
    yield backend
    backend.close()


def test_prometheus_stores_the_age_of_the_last_complete_answer(prometheus_processes, require_exporter, machine_tree,
                                                                 tmp_path):
    root = str(tmp_path / "host")
    shutil.copytree(machine_tree("epyc-7443-highpoint", "md-degraded"), root, symlinks=True)
    state = os.path.realpath(os.path.join(root, "sys", "block", "md0", "md", "array_state"))
    os.unlink(state)
    os.mkfifo(state)  # reading it blocks until a writer comes: never, here
    # The server's deadline (3 s) is longer than Prometheus' timeout (2 s, its wait 1.8 s), and the
    # read is called blocked only after 120 s: every scrape of the test reads md0 until the deadline.
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
            "--web.scrape-timeout=3s", "--web.read-blocked-after=120s"]
    with run_exporter(args, str(tmp_path)) as exporter:
        prometheus = prometheus_processes.prometheus(harness.prometheus_config(
            {"storpath": [f"127.0.0.1:{exporter.port}"]}, interval="2s"))
        ages = harness.wait_until(lambda: [float(r["value"][1]) for r in prometheus.query(AGE)] or None, 60,
                                  "an answer stored", diagnostics=prometheus.logs)
        seen = []

        def several_stale():
            seen.extend(float(r["value"][1]) for r in prometheus.query(AGE))
            return len(seen) >= 5 and seen

        harness.wait_until(several_stale, 60, "several answers stored", interval=2.0)
        print(f"ages Prometheus stored: {ages + seen}")
        # Each answer Prometheus got is the last complete one: read for an earlier scrape, about an
        # interval before Prometheus asked (a fresh one would be about 0 s old).
        assert all(age > 1.0 for age in seen), seen
        assert prometheus.query('up{job="storpath"} == 1')
