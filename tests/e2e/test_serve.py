"""The exporter process: endpoints, flags, config file, shutdown, a failing collector."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_exporter

ENV = {"PYTHONPATH": os.path.join(ROOT, "exporter")}


def storpath(*args, **kwargs):
    env = dict(os.environ, **ENV)
    return subprocess.run([sys.executable, "-m", "storpath", *args], capture_output=True, text=True, env=env,
                          timeout=30, **kwargs)


def test_endpoints(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        landing = exporter.get("/")
        assert landing.status_code == 200 and 'href="metrics"' in landing.text and "pcie" in landing.text
        assert exporter.get("/-/healthy").text == "Healthy\n"
        assert exporter.get("/nope").status_code == 404
        metrics = exporter.get("/metrics")
        assert metrics.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "storpath_build_info{" in metrics.text
        raw = exporter.get("/metrics", headers={"Accept-Encoding": "gzip"})
        assert raw.headers.get("Content-Encoding") == "gzip"
        assert "storpath_build_info{" in raw.text  # requests decompressed it
        # Prometheus asks for OpenMetrics first, and gets it.
        om = exporter.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
        assert om.text.endswith("# EOF\n") and not metrics.text.endswith("# EOF\n")


def test_gzip_responses_decode_with_gzip_itself_scrape_after_scrape(exporter_on):
    """GNU gzip (not Python's decoder) must read every response as exactly the plain text."""
    import re

    volatile = re.compile(r"^storpath_scrape_(?:(?:collector|source)_duration_seconds\{|collected_timestamp_seconds ).*$",
                          re.M)
    with exporter_on("am4-x570-firecuda", "healthy", "--web.disable-exporter-metrics") as exporter:
        for _ in range(3):
            raw = exporter.get("/metrics", headers={"Accept-Encoding": "gzip"}, stream=True)
            assert raw.headers.get("Content-Encoding") == "gzip"
            body = raw.raw.read(decode_content=False)
            done = subprocess.run(["gzip", "-dc"], input=body, capture_output=True, timeout=30)
            assert done.returncode == 0, done.stderr
            plain = exporter.get("/metrics", headers={"Accept-Encoding": "identity"}).text
            assert volatile.sub("", done.stdout.decode()) == volatile.sub("", plain)


def test_no_collector_flag_turns_a_collector_off(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy", "--no-collector.pcie") as exporter:
        text = exporter.metrics()
    assert "storpath_pcie_current_link_speed_transfers_per_second{" not in text
    assert 'storpath_scrape_collector_success{collector="pcie"}' not in text
    assert 'storpath_scrape_collector_success{collector="block"} 1.0' in text


def test_config_file_and_flag_precedence(exporter_on, tmp_path):
    config = tmp_path / "storpath.yml"
    config.write_text("collectors:\n  pcie:\n    enabled: false\nlog:\n  level: debug\n")
    with exporter_on("am4-x570-firecuda", "healthy", f"--config.file={config}", "--collector.pcie") as exporter:
        text = exporter.metrics()
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text


@pytest.mark.parametrize("content,message", [
    ("collectors:\n  pcie:\n    enabeld: true\n", "unknown key collectors.pcie.enabeld"),
    ("collectors:\n  nosuch: {}\n", "unknown collector 'nosuch'"),
    ("log: {level: loud}\n", "log.level: 'loud' is not one of"),
    ("web: [1, 2\n", "not valid YAML"),
    ("collectors:\n  pcie:\n    enabled: maybe\n", "collectors.pcie.enabled: expected true or false"),
])
def test_broken_config_is_refused_with_a_clear_message(tmp_path, content, message):
    config = tmp_path / "bad.yml"
    config.write_text(content)
    result = storpath("serve", f"--config.file={config}", "--web.listen-address=127.0.0.1:0")
    assert result.returncode != 0
    assert "storpath: configuration error:" in result.stderr and "Traceback" not in result.stderr
    assert message in result.stderr


def test_missing_config_file(tmp_path):
    result = storpath("serve", f"--config.file={tmp_path}/absent.yml")
    assert result.returncode == 2 and "cannot read config file" in result.stderr


def test_version_and_help():
    assert storpath("--version").stdout.strip().startswith("storpath ")
    helptext = storpath("serve", "--help").stdout
    for flag in ("--web.listen-address", "--path.sysfs", "--path.procfs", "--path.dev", "--collector.pcie",
                 "--log.level", "--config.file"):
        assert flag in helptext


def test_sigterm_shuts_down_cleanly(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        exporter.proc.send_signal(signal.SIGTERM)
        assert exporter.proc.wait(10) == 0
        log = exporter.log()
    assert 'msg="shutting down" signal=SIGTERM' in log and "msg=stopped" in log
    assert "level=info" in log and "ts=" in log


def test_port_in_use_is_reported(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        result = storpath("serve", f"--web.listen-address=127.0.0.1:{exporter.port}")
    assert result.returncode == 1 and "cannot listen" in result.stderr


def test_missing_sysfs_root_still_serves(tmp_path):
    """A root that cannot be read fails the collectors that read it (what they would report
    is unknown, not empty), and the exporter still serves everything else."""
    with run_exporter([f"--path.sysfs={tmp_path}/nothing", f"--path.procfs={tmp_path}/nothing"], str(tmp_path)) as exp:
        text = exp.metrics()
        log = exp.log()
    assert 'storpath_scrape_collector_success{collector="pcie"} 0.0' in text
    assert 'storpath_scrape_collector_success{collector="probes"} 1.0' in text
    assert "storpath_build_info{" in text
    assert "storpath_pcie_current_link_speed_transfers_per_second{" not in text
    assert "cannot read its root" in log and f"{tmp_path}/nothing" in log


def test_a_failing_collector_does_not_break_the_others(tmp_path, machine_tree):
    """A collector that raises is reported with success 0; the rest of the scrape is served."""
    root = machine_tree("am4-x570-firecuda", "healthy")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "sitecustomize.py").write_text(
        "import storpath.collectors.block as b\n"
        "def boom(self, snapshot):\n    raise OSError('disk on fire')\n"
        "b.BlockCollector.values = boom\n")
    env = {"PYTHONPATH": f"{plugin}{os.pathsep}{os.path.join(ROOT, 'exporter')}"}
    with run_exporter([f"--path.sysfs={root}/sys"], str(tmp_path), env=env) as exporter:
        text = exporter.metrics()
        log = exporter.log()
    assert 'storpath_scrape_collector_success{collector="block"} 0.0' in text
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text
    assert "storpath_pcie_current_link_speed_transfers_per_second{" in text
    assert 'msg="collector failed" collector=block' in log and "disk on fire" in log


def _answers(port: int, host: str = "127.0.0.1") -> bool:
    import requests

    url_host = f"[{host}]" if ":" in host else host
    try:
        return requests.get(f"http://{url_host}:{port}/-/healthy", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def test_every_listen_address_given_is_listened_on(exporter_on):
    """As exporter-toolkit: a repeated --web.listen-address adds an address (before, the last
    one given replaced the others without a word)."""
    from tests.conftest import free_port

    second = free_port()
    with exporter_on("am4-x570-firecuda", "healthy", f"--web.listen-address=127.0.0.2:{second}") as exporter:
        assert _answers(exporter.port) and _answers(second, "127.0.0.2")
        assert exporter.get("/metrics").status_code == 200
        log = exporter.log()
    assert f"127.0.0.1:{exporter.port},127.0.0.2:{second}" in log


def test_listen_addresses_from_the_config_file(tmp_path):
    from tests.conftest import free_port
    from tests.processes import wait_until_answers

    ports = [free_port(), free_port()]
    config = tmp_path / "storpath.yml"
    config.write_text(f"web:\n  listen_address: ['127.0.0.1:{ports[0]}', '127.0.0.3:{ports[1]}']\n")
    env = dict(os.environ, **ENV)
    proc = subprocess.Popen([sys.executable, "-m", "storpath", "serve", f"--config.file={config}",
                             f"--path.sysfs={tmp_path}/none", f"--path.procfs={tmp_path}/none"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_answers(proc, f"http://127.0.0.1:{ports[0]}/-/healthy", "storpath")
        assert _answers(ports[1], "127.0.0.3")
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_address_that_cannot_be_listened_on_is_named(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        from tests.conftest import free_port

        free = free_port()
        result = storpath("serve", f"--web.listen-address=127.0.0.1:{free}",
                          f"--web.listen-address=127.0.0.1:{exporter.port}")
        assert result.returncode == 1 and "cannot listen" in result.stderr
        assert f"127.0.0.1:{exporter.port}" in result.stderr.split("err=")[-1]
        # The address bound before the one that failed is given back.
        assert not _answers(free)
