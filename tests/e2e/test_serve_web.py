"""The HTTP side of the real `storpath serve`, with real clients: TLS and basic auth (curl),
OpenMetrics (prometheus_client's parser, promtool), negotiation, limits, the scrape deadline
with a blocking attribute file, SIGHUP reloads."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from tests.conftest import require_tool, run_exporter
from tests.e2e.test_serve import storpath
from tests.tls import make_certs, write_web_config

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    require_tool("openssl", "openssl")
    return make_certs(str(tmp_path_factory.mktemp("certs")))


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([require_tool("curl", "curl"), "-sS", "--max-time", "20", *args], capture_output=True,
                          text=True, timeout=30)


def test_tls_and_basic_auth_with_curl(exporter_on, tmp_path, certs):
    web = write_web_config(str(tmp_path / "web.yml"), certs, users={"prometheus": "s3cret"},
                           headers={"X-Content-Type-Options": "nosniff"})
    with exporter_on("am4-x570-firecuda", "healthy", f"--web.config.file={web}", ca=certs.ca,
                     auth=("prometheus", "s3cret")) as exporter:
        url = exporter.url + "/metrics"
        good = curl("--cacert", certs.ca, "-u", "prometheus:s3cret", "-D", "-", url)
        assert good.returncode == 0, good.stderr
        assert good.stdout.startswith("HTTP/1.1 200") and "x-content-type-options: nosniff" in good.stdout.lower()
        assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in good.stdout
        # what the rules' runbook links are made with: this exporter's pages are on https, behind a password
        assert 'storpath_web_info{basic_auth="true",scheme="https"} 1.0' in good.stdout
        for auth in (["-u", "prometheus:wrong"], ["-u", "nobody:s3cret"], []):
            denied = curl("--cacert", certs.ca, "-D", "-", *auth, url)
            assert denied.stdout.startswith("HTTP/1.1 401"), (auth, denied.stdout[:300])
            assert 'www-authenticate: basic realm="storpath"' in denied.stdout.lower()
            assert "storpath_" not in denied.stdout
        # Plain HTTP to the TLS port: an error, no metrics.
        plain = curl("-D", "-", "-u", "prometheus:s3cret", url.replace("https://", "http://"))
        assert "storpath_" not in plain.stdout and "HTTP/1.1 200" not in plain.stdout
        assert plain.stdout.startswith("HTTP/1.0 400")
        # A client that does not trust the certificate gets nowhere.
        assert curl("-u", "prometheus:s3cret", url).returncode != 0
        # The health check needs no password (a kubelet has none); the landing page does.
        assert exporter.get("/-/healthy", auth=None).status_code == 200
        assert exporter.get("/", auth=None).status_code == 401
        # The server is still fine after all that.
        assert exporter.get("/metrics").status_code == 200


def test_client_certificates(exporter_on, tmp_path, certs):
    web = write_web_config(str(tmp_path / "web.yml"), certs, client_auth_type="RequireAndVerifyClientCert",
                           client_ca_file=certs.ca, min_version="TLS12")
    with exporter_on("am4-x570-firecuda", "healthy", f"--web.config.file={web}", ca=certs.ca,
                     cert=(certs.client_cert, certs.client_key)) as exporter:
        url = exporter.url + "/metrics"
        assert curl("--cacert", certs.ca, url).returncode != 0
        ok = curl("--cacert", certs.ca, "--cert", certs.client_cert, "--key", certs.client_key, url)
        assert ok.returncode == 0 and "storpath_build_info{" in ok.stdout


@pytest.mark.parametrize("content,message", [
    ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n",
     "tls_server_config.cert_file: /nonexistent.crt does not exist"),
    ("basic_auth_users:\n  prom: plaintext\n", "basic_auth_users.prom: not a bcrypt hash"),
    ("tls_server_confg: {}\n", "unknown key 'tls_server_confg'"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "X-Frame-Options: 'allow' is not one of"),
    ("tls_server_config:\n  cert_file: CERT\n  key_file: CERT\n", "cannot load the certificate and key"),
])
def test_bad_web_config_is_refused_at_start(tmp_path, certs, content, message):
    path = tmp_path / "web.yml"
    path.write_text(content.replace("CERT", certs.cert))
    result = storpath("serve", f"--web.config.file={path}", "--web.listen-address=127.0.0.1:0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr


def test_openmetrics_parses_and_passes_promtool(exporter_on):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    with exporter_on("intel-r2224wft-switches", "zfs-degraded") as exporter:
        response = exporter.get("/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
    assert response.headers["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    text = response.text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["storpath_build_info"].samples[0].labels["revision"]
    assert families["process_open_fds"].samples[0].value > 0
    counters = [f for f in families.values() if f.type == "counter"]
    assert counters, "the fixture exposes counters"
    for family in counters:
        assert not family.name.endswith("_total")
        assert all(s.name.startswith(family.name + "_total") for s in family.samples)
        assert f"# TYPE {family.name} counter\n" in text
    assert "# UNIT process_resident_memory_bytes bytes\n" in text
    # promtool 2.42 reads what it is given as the text format 0.0.4: it parses the OpenMetrics body
    # (no error), and lints each counter's `_total` samples as a family of their own without a HELP.
    # That, and nothing else, may be said.
    promtool = require_tool("promtool", "prometheus")
    checked = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    expected = {f"{family.name}_total no help text" for family in counters}
    said = set((checked.stdout + checked.stderr).decode().splitlines())
    assert checked.returncode in (0, 3) and said <= expected, checked.stderr.decode()


def test_negotiation_keep_alive_and_vary(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=10)
        try:
            answers = []
            for headers in ({"Accept-Encoding": "gzip;q=0, identity"}, {"Accept-Encoding": "gzip"},
                            {"Accept-Encoding": "*;q=0.5"}, {"Accept": "text/plain", "Accept-Encoding": "br"}):
                conn.request("GET", "/metrics", headers=headers)
                response = conn.getresponse()
                body = response.read()
                answers.append((response.version, response.getheader("Content-Encoding"), response.getheader("Vary"),
                                body[:2]))
                sock = conn.sock
            assert sock is not None and conn.sock is sock  # one connection served them all
        finally:
            conn.close()
    assert [a[0] for a in answers] == [11] * 4
    assert [a[1] for a in answers] == [None, "gzip", "gzip", None]
    assert all("Accept-Encoding" in a[2] for a in answers)
    assert answers[1][3] == b"\x1f\x8b" and answers[0][3] == b"# "


def test_flags_telemetry_path_json_logs_and_disable_defaults(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy", "--web.telemetry-path=/probe-metrics", "--log.format=json",
                     "--collector.disable-defaults", "--collector.pcie", "--web.disable-exporter-metrics") as exporter:
        assert exporter.get("/metrics").status_code == 404
        text = exporter.get("/probe-metrics").text
        log_lines = exporter.log().splitlines()
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text
    assert 'collector="block"' not in text and "process_open_fds" not in text
    assert 'storpath_web_info{basic_auth="false",scheme="http"} 1.0' in text
    started = [json.loads(line) for line in log_lines if line.startswith("{")]
    listening = [r for r in started if r["msg"] == "storpath listening"]
    assert listening and listening[0]["collectors"] == "pcie" and listening[0]["level"] == "info"


def test_oversized_headers_are_refused_and_the_server_goes_on(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        big = exporter.get("/metrics", headers={"X-Filler": "x" * 200_000})
        assert big.status_code in (413, 431) and "storpath_" not in big.text
        assert exporter.get("/metrics").status_code == 200


def test_idle_connections_hold_no_worker(exporter_on):
    """Connections that send nothing (more than there are worker threads) must not keep a scrape
    waiting: before it gets a worker, a connection waits in the selector."""
    import socket

    with exporter_on("am4-x570-firecuda", "healthy", "--web.max-requests=4") as exporter:
        idle = [socket.create_connection(("127.0.0.1", exporter.port), timeout=5) for _ in range(100)]
        try:
            # The server closes a silent connection after 10 s; before that, a worker waiting on
            # one would be held all that time, so 8 s is what a stuck server could not answer in.
            assert exporter.get("/metrics", timeout=8).status_code == 200
            assert exporter.get("/-/healthy", timeout=8).status_code == 200
        finally:
            for sock in idle:
                sock.close()


def _blocking_md_tree(machine_tree, tmp_path) -> tuple:
    """The EPYC box with md0's array_state replaced by a FIFO: reading it blocks until a writer comes."""
    root = str(tmp_path / "host")
    shutil.copytree(machine_tree("epyc-7443-highpoint", "md-degraded"), root, symlinks=True)
    state = os.path.realpath(os.path.join(root, "sys", "block", "md0", "md", "array_state"))
    assert state.startswith(root)
    os.unlink(state)
    os.mkfifo(state)
    return root, state


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Threads:"))


def _success(text: str, collector: str) -> str:
    prefix = f'storpath_scrape_collector_success{{collector="{collector}"}} '
    return next(line[len(prefix):] for line in text.splitlines() if line.startswith(prefix))


def test_a_blocking_attribute_fails_its_collector_only_and_threads_do_not_pile_up(machine_tree, tmp_path):
    root, fifo = _blocking_md_tree(machine_tree, tmp_path)
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", "--web.disable-exporter-metrics",
            "--web.read-blocked-after=1s"]
    with run_exporter(args, str(tmp_path)) as exporter:
        deadline = {"X-Prometheus-Scrape-Timeout-Seconds": "2"}
        start = time.monotonic()
        first = exporter.get("/metrics", headers=deadline)
        assert time.monotonic() - start < 5 and first.status_code == 200
        assert _success(first.text, "md") == "0.0" and _success(first.text, "pcie") == "1.0"
        assert "storpath_pcie_current_link_speed_transfers_per_second{" in first.text
        threads = _threads(exporter.proc.pid)
        for _ in range(4):
            again = exporter.get("/metrics", headers=deadline).text
            assert _success(again, "md") == "0.0" and _success(again, "block") == "1.0"
        assert _threads(exporter.proc.pid) <= threads  # the blocked read is not started again
        log = exporter.log()
        assert 'msg="collector failed" collector=md' in log and "blocked reading" in log
        assert "md0/md/array_state" in log and "not started again" in log
        assert log.count('msg="collector failed" collector=md') == 1  # once, not per scrape
        # The read returns: the collector works again from the next scrape on.
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        regular = fifo + ".new"
        with open(regular, "w") as handle:
            handle.write("clean\n")
        os.replace(regular, fifo)
        os.write(writer, b"clean\n")
        os.close(writer)
        end = time.monotonic() + 10
        while _success(exporter.get("/metrics", headers=deadline).text, "md") != "1.0":
            assert time.monotonic() < end, exporter.log()
            time.sleep(0.2)


def test_max_requests_answers_503_past_the_limit(machine_tree, tmp_path):
    root, fifo = _blocking_md_tree(machine_tree, tmp_path)
    # The blocked md read is given up after 3 s (the server's bound): the first scrape waits that long.
    args = [f"--path.sysfs={root}/sys", "--web.max-requests=1", "--web.read-blocked-after=3s"]
    with run_exporter(args, str(tmp_path)) as exporter:
        statuses = []
        slow = threading.Thread(target=lambda: statuses.append(exporter.get("/metrics").status_code))
        slow.start()
        time.sleep(1.0)  # the first scrape now waits for the blocked md read
        second = exporter.get("/metrics")
        slow.join()
        assert statuses == [200] and second.status_code == 503
        assert exporter.get("/-/healthy").status_code == 200
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)


def test_concurrent_scrapes_share_one_computation(exporter_on):
    with exporter_on("epyc-7443-highpoint", "nps1") as exporter:
        results = []
        workers = [threading.Thread(target=lambda: results.append(exporter.get("/metrics").text)) for _ in range(20)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert len(results) == 20 and all("storpath_build_info{" in r for r in results)
        # Every answer is a whole scrape; fewer scrapes were computed than answered.
        durations = {line for r in results for line in r.splitlines()
                     if line.startswith('storpath_scrape_collector_duration_seconds{collector="pcie"}')}
        assert len(durations) < 20


def test_sighup_reloads_both_files_without_dropping_a_scrape(exporter_on, tmp_path, certs):
    config = tmp_path / "storpath.yml"
    config.write_text("collectors:\n  zfs:\n    enabled: false\n")
    web = write_web_config(str(tmp_path / "web.yml"), certs, users={"prometheus": "s3cret"})
    with exporter_on("am4-x570-firecuda", "healthy", f"--config.file={config}", f"--web.config.file={web}",
                     ca=certs.ca, auth=("prometheus", "s3cret")) as exporter:
        assert 'collector="zfs"' not in exporter.metrics()
        failures, done, count = [], threading.Event(), [0]

        def scrape_all_the_time():
            while not done.is_set():
                try:
                    response = exporter.get("/metrics")
                    if response.status_code != 200 or "storpath_build_info{" not in response.text:
                        failures.append(response.status_code)
                except Exception as exc:  # a dropped connection is what must not happen
                    failures.append(repr(exc))
                count[0] += 1

        scraper = threading.Thread(target=scrape_all_the_time)
        scraper.start()
        try:
            time.sleep(0.5)
            config.write_text("collectors:\n  zfs:\n    enabled: true\n")
            write_web_config(web, certs, users={"prometheus": "s3cret"}, headers={"X-Frame-Options": "deny"})
            exporter.proc.send_signal(signal.SIGHUP)
            end = time.monotonic() + 15
            while "configuration reloaded" not in exporter.log():
                assert time.monotonic() < end and exporter.proc.poll() is None, exporter.log()
                time.sleep(0.1)
            time.sleep(0.5)
        finally:
            done.set()
            scraper.join()
        assert not failures and count[0] > 3
        after = exporter.get("/metrics")
        assert 'storpath_scrape_collector_success{collector="zfs"} 1.0' in after.text
        assert after.headers["X-Frame-Options"] == "deny"
        # A broken file keeps the running configuration, and says why.
        (tmp_path / "web.yml").write_text("basic_auth_users:\n  prometheus: not-a-hash\n")
        exporter.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 15
        while "reload failed" not in exporter.log():
            assert time.monotonic() < end, exporter.log()
            time.sleep(0.1)
        assert exporter.proc.poll() is None
        assert exporter.get("/metrics").status_code == 200
        assert "basic_auth_users.prometheus: not a bcrypt hash" in exporter.log()
