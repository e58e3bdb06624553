"""The real `storpath serve` and `storpath probe` with probes configured: metrics,
results kept across a restart, scrapes during a probe, refused write profiles, the
one-off command's table and JSON, and the expectation on a fixture machine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest
import yaml

from tests.conftest import ROOT, require_tool, run_exporter
from tests.fixtures import machines
from tests.fixtures.builders_probes import add_md
from tests.processes import fio_children

GEN4_X4 = 16e9 * 128 / 130 / 8 * 4


@pytest.fixture(autouse=True)
def state_directory(tmp_path, monkeypatch):
    """storpath keeps its state file only inside its state directory ($STATE_DIRECTORY)."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))


def write_config(tmp_path, probes, name="storpath.yml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"probes": probes}))
    return str(path)


def sample(text: str, name: str, **labels) -> float:
    """The value of one series of the exposition; fails when it is absent."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{labels} in exposition")


def wait_for(exporter, name, timeout=60.0, **labels) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = exporter.metrics()
        try:
            if sample(text, name, **labels) >= 1:
                return text
        except AssertionError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{name}{labels} did not reach 1 within {timeout}s:\n{exporter.log()}")


def storpath(*args, env=None, timeout=120):
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.path.join(ROOT, "exporter")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "storpath", *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


@pytest.fixture(scope="module")
def fio_tool():
    return require_tool("fio", "fio")


def test_results_survive_a_restart(tmp_path, fio_tool):
    target = str(tmp_path / "probe.dat")
    config = write_config(tmp_path, {"runtime": "1s", "jitter": 0, "busy_threshold": None, "file_size": "16MiB",
                                     "state_file": str(tmp_path / "state" / "probes.json"),
                                     "targets": [{"file": target, "name": "scratch", "profiles": ["seqread"],
                                                  "expected_read_bytes_per_second": "100GB/s"}]})
    with run_exporter([f"--config.file={config}"], str(tmp_path)) as exporter:
        text = wait_for(exporter, "storpath_probe_runs_total", target="scratch", profile="seqread")
        bandwidth = sample(text, "storpath_probe_read_bytes_per_second", target="scratch", profile="seqread")
        last_success = sample(text, "storpath_probe_last_success_timestamp_seconds", target="scratch")
        assert bandwidth > 0
        assert sample(text, "storpath_probe_read_operations_per_second", target="scratch", profile="seqread") > 0
        assert sample(text, "storpath_probe_expected_read_bytes_per_second", target="scratch") == 100e9
        for quantile in ("0.5", "0.99", "0.999"):
            assert sample(text, "storpath_probe_read_latency_seconds", target="scratch", quantile=quantile) > 0
        assert sample(text, "storpath_probe_failures_total", target="scratch", reason="timeout") == 0
        assert sample(text, "storpath_probe_target_info", target="scratch", kind="file") == 1
        assert 'collector="probes"} 1.0' in text
    assert os.path.exists(tmp_path / "state" / "probes.json")
    with run_exporter([f"--config.file={config}"], str(tmp_path)) as exporter:
        text = exporter.metrics()  # at once: no probe has run in this process
        assert sample(text, "storpath_probe_read_bytes_per_second", target="scratch") == bandwidth
        assert sample(text, "storpath_probe_last_success_timestamp_seconds", target="scratch") == last_success
        assert sample(text, "storpath_probe_runs_total", target="scratch") == 1
        time.sleep(2)  # the next probe waits out the interval from the last one
        assert sample(exporter.metrics(), "storpath_probe_runs_total", target="scratch") == 1
        assert "probe results restored" in exporter.log()


def test_exposition_passes_promtool_with_every_kind_of_series(tmp_path, fio_tool):
    promtool = require_tool("promtool", "prometheus")
    config = write_config(tmp_path, {"runtime": "1s", "jitter": 0, "busy_threshold": None, "file_size": "16MiB",
                                     "state_file": str(tmp_path / "probes.json"),
                                     "targets": [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"],
                                                  "expected_read_bytes_per_second": "1GB/s"},
                                                 {"device": "/dev/nvme0n1"}]})
    with run_exporter([f"--config.file={config}", f"--path.dev={tmp_path}/dev"], str(tmp_path)) as exporter:
        wait_for(exporter, "storpath_probe_runs_total", profile="seqread", target=str(tmp_path / "probe.dat"))
        text = wait_for(exporter, "storpath_probe_failures_total", target="/dev/nvme0n1", profile="randread",
                        reason="target_unusable")
        log = exporter.log()
    assert "cannot open /dev/nvme0n1" in log
    assert "# TYPE storpath_probe_read_latency_seconds summary" in text
    assert sample(text, "storpath_probe_read_latency_seconds", quantile="0.999") > 0
    result = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@contextmanager
def probing_exporter(tmp_path, runtime: str):
    """The exporter with one file probe of `runtime`, once its fio runs."""
    config = write_config(tmp_path, {"runtime": runtime, "jitter": 0, "busy_threshold": None, "file_size": "16MiB",
                                     "state_file": str(tmp_path / "probes.json"),
                                     "targets": [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}]})
    with run_exporter([f"--config.file={config}"], str(tmp_path)) as exporter:
        deadline = time.monotonic() + 30
        while not fio_children(exporter.proc.pid):
            assert time.monotonic() < deadline, exporter.log()
            time.sleep(0.05)
        yield exporter


def test_scrape_during_a_probe_is_as_fast_as_without(tmp_path, fio_tool):
    with probing_exporter(tmp_path, "4s") as exporter:
        durations = []
        for _ in range(5):
            start = time.monotonic()
            exporter.metrics()
            durations.append(time.monotonic() - start)
        assert fio_children(exporter.proc.pid), "the probe ended before the scrapes: they did not overlap"
        # A scrape does not wait for the probe (4 s of fio): it serves what it has.
        assert max(durations) < 1.0, durations


def test_write_profile_refused_at_load(tmp_path):
    config = write_config(tmp_path, {"profiles": {"wipe": {"rw": "randwrite", "bs": "4k"}},
                                     "targets": [{"device": "/dev/sda", "profiles": ["wipe"]}]})
    for command in (["serve", "--web.listen-address=127.0.0.1:0"], ["probe", "/dev/sda"]):
        result = storpath(*command, f"--config.file={config}", timeout=60)
        assert result.returncode == 2, result
        assert "probes.profiles.wipe.rw: 'randwrite' is not a read workload; probes only ever read" in result.stderr


def test_probe_command_table_and_json(tmp_path, fio_tool):
    config = write_config(tmp_path, {"busy_threshold": None, "file_size": "16MiB",
                                     "state_file": str(tmp_path / "state" / "probes.json"),
                                     "targets": [{"file": str(tmp_path / "probe.dat"), "name": "scratch",
                                                  "expected_read_bytes_per_second": {"seqread": "100GB/s"}}]})
    table = storpath("probe", "scratch", f"--config.file={config}", "--runtime=1s")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("scratch (file")
    header = next(line for line in lines if line.startswith("profile"))
    assert header.split() == ["profile", "read", "IOPS", "p50", "p99", "p99.9", "expected", "of", "expected"]
    seq = next(line for line in lines if line.startswith("seqread"))
    assert "100 GB/s (configured)" in seq and re.search(r"\d+%", seq)
    assert any(line.startswith("randread") for line in lines)
    assert "probing scratch seqread for 1s" in table.stderr  # progress, on stderr when it is not a terminal
    assert not os.path.exists(tmp_path / "state" / "probes.json")  # the exporter's file is left alone

    result = storpath("probe", str(tmp_path / "probe.dat"), f"--config.file={config}", "--runtime=1s",
                      "--profile=randread", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "file" and [r["profile"] for r in data["results"]] == ["randread"]
    row = data["results"][0]
    assert row["status"] == "ok" and row["read_iops"] > 0 and set(row["read_latency_seconds"]) == {"0.5", "0.99",
                                                                                                     "0.999"}
    assert row["expected_read_bytes_per_second"] is None  # 4 KiB reads are not held against a bandwidth


def test_probe_command_skips_a_busy_device(tmp_path, fio_tool):
    proc = tmp_path / "proc"
    proc.mkdir()
    stop = threading.Event()

    def busy_kernel():
        ticks = 0
        while not stop.is_set():
            ticks += 50  # in flight all the time
            (proc / "diskstats.tmp").write_text(f" 259 0 busydisk0 10 0 80 9 0 0 0 0 3 {ticks} 9 0 0 0 0 0 0\n")
            os.replace(proc / "diskstats.tmp", proc / "diskstats")
            time.sleep(0.05)

    writer = threading.Thread(target=busy_kernel)
    writer.start()
    try:
        config = write_config(tmp_path, {"busy_threshold": 0.5, "busy_sample": "1s",
                                         "targets": [{"file": str(tmp_path / "probe.dat"),
                                                      "device_name": "busydisk0"}]})
        result = storpath("probe", str(tmp_path / "probe.dat"), f"--config.file={config}", "--runtime=1s",
                          f"--path.procfs={proc}")
    finally:
        stop.set()
        writer.join()
    assert result.returncode == 1, result
    assert re.search(r"seqread\s+skipped: busy", result.stdout), result.stdout
    assert "busydisk0 busy" in result.stdout
    assert not os.path.exists(tmp_path / "probe.dat")  # skipped before anything was created or read


def test_expectation_of_an_md_raid0_on_the_firecuda_fixture(tmp_path):
    root = str(tmp_path / "machine")
    builder = machines.load("am4-x570-firecuda").build(root, "healthy")
    add_md(builder, "md0", "raid0", ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"])
    config = write_config(tmp_path, {"targets": ["/dev/md0", "/dev/nvme1n1"], "jitter": 0,
                                     "state_file": str(tmp_path / "probes.json")})
    paths = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.dev={root}/dev"]
    result = storpath("probe", "/dev/md0", f"--config.file={config}", "--json", *paths)
    data = json.loads(result.stdout)
    seq = data["results"][0]
    # The fixture has no device nodes: the probe cannot run, but the expectation is there.
    assert (seq["status"], seq["reason"]) == ("failed", "target_unusable")
    assert seq["expected_read_bytes_per_second"] == pytest.approx(4 * GEN4_X4)
    assert seq["expected_read_bytes_per_second"] == pytest.approx(31.5e9, rel=2e-3)
    assert seq["expected_source"] == "path"
    assert sorted(data["path_limited_by"]) == ["0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]

    with run_exporter([f"--config.file={config}", *paths], str(tmp_path)) as exporter:
        text = wait_for(exporter, "storpath_probe_target_info", target="/dev/md0", device="md0")
        assert sample(text, "storpath_probe_expected_read_bytes_per_second", target="/dev/md0",
                      profile="seqread") == pytest.approx(4 * GEN4_X4)
        assert sample(text, "storpath_probe_expected_read_bytes_per_second", target="/dev/nvme1n1",
                      profile="seqread") == pytest.approx(GEN4_X4)
        assert "storpath_probe_expected_read_bytes_per_second{" not in "\n".join(
            line for line in text.splitlines() if 'profile="randread"' in line)


def test_sigterm_during_a_probe_is_not_a_probe_failure(tmp_path, fio_tool):
    """Stopping the exporter kills a running fio: that is no fault of the device. Nothing is
    counted as failed, and what the probe read stays charged to the budget (saved)."""
    state = tmp_path / "probes.json"
    with probing_exporter(tmp_path, "20s") as exporter:
        time.sleep(1.0)  # fio reads for a while
        exporter.proc.send_signal(signal.SIGHUP)  # nothing changed: the probe goes on
        time.sleep(0.5)
        assert fio_children(exporter.proc.pid), exporter.log()
        exporter.proc.terminate()
        assert exporter.proc.wait(20) == 0
        log = exporter.log()
    assert "probe interrupted by shutdown" in log and 'msg="probe failed"' not in log
    saved = json.loads(state.read_text())
    records = [rec for profiles in saved["probes"].values() for rec in profiles.values()]
    assert all(not rec["failures"] and not rec["runs"] for rec in records), saved
    assert any(b > 0 for entries in saved["io"].values() for _, b in entries), saved  # what it read is charged


def test_probe_command_never_follows_a_planted_lock_link(tmp_path):
    """Before: `storpath probe` (run as root) opened locks/<device>.lock O_RDWR|O_CREAT through
    whatever link the exporter's user had put there, creating or opening any path."""
    fio = tmp_path / "fake-fio"
    fio.write_text("#!/bin/sh\necho '{\"jobs\": [{\"error\": 0, \"read\": {\"io_bytes\": 1048576, "
                   "\"bw_bytes\": 1048576, \"iops\": 256, \"runtime\": 1000}, \"write\": {\"io_bytes\": 0}}]}'\n")
    fio.chmod(0o755)
    config = write_config(tmp_path, {"busy_threshold": None, "file_size": "1MiB", "fio": str(fio),
                                     "state_file": str(tmp_path / "state" / "probes.json"),
                                     "targets": [{"file": str(tmp_path / "probe.dat"), "name": "scratch",
                                                  "profiles": ["seqread"]}]})
    (tmp_path / "state").mkdir()  # the exporter's state folder: `storpath probe` takes its locks there
    assert storpath("probe", "scratch", f"--config.file={config}").returncode == 0
    locks = tmp_path / "state" / "locks"
    existing = tmp_path / "existing"
    existing.write_text("keep\n")
    missing = tmp_path / "missing"
    for index, name in enumerate(sorted(os.listdir(locks))):
        os.unlink(locks / name)
        os.symlink(existing if index % 2 else missing, locks / name)
    result = storpath("probe", "scratch", f"--config.file={config}")
    assert result.returncode == 1, result
    assert "probe lock refused" in result.stdout + result.stderr and "symbolic link" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.lexists(missing) and existing.read_text() == "keep\n"
