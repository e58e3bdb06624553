"""Debian's Prometheus 2.42, as a local process, scrapes the exporter over TLS with basic auth
(its `tls_config` and `basic_auth`), as it asks by default (OpenMetrics first); a job with a
wrong password and one without TLS are refused."""

from __future__ import annotations

import pytest

from tests.conftest import require_tool, run_exporter
from tests.tls import make_certs, write_web_config

from . import harness


@pytest.fixture
def prometheus_processes(process_binaries, tmp_path_factory):
    backend = harness.ProcessBackend(tmp_path_factory.mktemp("processes"))
    yield backend
    backend.close()


def test_prometheus_scrapes_over_tls_with_basic_auth(prometheus_processes, require_exporter, sysfs_tree, tmp_path):
    require_tool("openssl", "openssl")
    certs = make_certs(str(tmp_path / "certs"))
    web = write_web_config(str(tmp_path / "web.yml"), certs, users={"prometheus": "s3cret"})
    args = [f"--path.sysfs={sysfs_tree}", f"--web.config.file={web}"]
    with run_exporter(args, str(tmp_path), ca=certs.ca, auth=("prometheus", "s3cret")) as exporter:
        target = [f"127.0.0.1:{exporter.port}"]

        def job(name: str, **settings) -> dict:
            return {"job_name": name, "scheme": "https", "static_configs": [{"targets": target}],
                    "tls_config": {"ca_file": certs.ca}, **settings}

        config = harness.prometheus_config({})
        config["scrape_configs"] = [
            job("storpath", basic_auth={"username": "prometheus", "password": "s3cret"}),
            job("wrong-password", basic_auth={"username": "prometheus", "password": "guess"}),
            job("no-password"),
            {"job_name": "plain-http", "static_configs": [{"targets": target}],
             "basic_auth": {"username": "prometheus", "password": "s3cret"}},
        ]
        prometheus = prometheus_processes.prometheus(config)
        prometheus.wait_targets_up(["storpath"], timeout=60)
        assert prometheus.query('storpath_pcie_current_link_speed_transfers_per_second{job="storpath"}')
        assert prometheus.query('process_open_fds{job="storpath"} > 0')
        assert prometheus.query('storpath_build_info{job="storpath",revision!=""}')

        def refused():
            targets = {t["labels"]["job"]: t for t in prometheus.targets()}
            others = [targets.get(j) for j in ("wrong-password", "no-password", "plain-http")]
            return targets if all(t and t["health"] == "down" and t["lastError"] for t in others) else None

        targets = harness.wait_until(refused, 60, "the refused jobs down", diagnostics=prometheus.logs)
        assert "401" in targets["wrong-password"]["lastError"] and "401" in targets["no-password"]["lastError"]
        assert "400" in targets["plain-http"]["lastError"]
        assert not prometheus.query('storpath_build_info{job=~"wrong-password|no-password|plain-http"}')
