"""Signals against the real `storpath serve`: a burst of SIGHUPs a few microseconds apart
(an operator's loop, a config manager gone wrong) is taken as reloads, never deadlocks the
main loop or ends the process, and SIGTERM still stops it (docs/serving.md)."""

from __future__ import annotations

import os
import random
import signal
import time

ROUNDS = 20
BURST = 5000
MAX_GAP = 200e-6  # seconds between two SIGHUPs of a burst, drawn from 0 to this
RELOADED_WITHIN = 15.0  # a reload on the 2-core machine takes well under a second
STOPPED_WITHIN = 5.0


def send_burst(pid: int, count: int, rng: random.Random) -> None:
    """`count` SIGHUPs, each 0 to MAX_GAP apart (a spin: sleep cannot wait a few microseconds)."""
    for _ in range(count):
        os.kill(pid, signal.SIGHUP)
        until = time.perf_counter() + rng.uniform(0, MAX_GAP)
        while time.perf_counter() < until:
            pass


def collector_enabled(config, enabled: bool) -> None:
    config.write_text(f"collectors:\n  md:\n    enabled: {'true' if enabled else 'false'}\n")


def md_served(exporter) -> bool:
    return 'storpath_scrape_collector_success{collector="md"}' in exporter.get("/metrics", timeout=10).text


def test_sighup_bursts_neither_deadlock_nor_kill_and_sigterm_still_stops(exporter_on, tmp_path):
    config = tmp_path / "storpath.yml"
    collector_enabled(config, True)
    rng = random.Random(35)
    with exporter_on("am4-x570-firecuda", "healthy", f"--config.file={config}") as exporter:
        pid = exporter.proc.pid
        started = time.monotonic()
        for round_ in range(ROUNDS):
            send_burst(pid, BURST, rng)
            assert exporter.proc.poll() is None, f"round {round_}: died\n{exporter.log()[-3000:]}"
            # The next SIGHUP after the burst applies a changed file: the main loop is not stuck.
            enabled = round_ % 2 == 1
            collector_enabled(config, enabled)
            os.kill(pid, signal.SIGHUP)
            end = time.monotonic() + RELOADED_WITHIN
            while md_served(exporter) != enabled:
                assert exporter.proc.poll() is None, f"round {round_}: died\n{exporter.log()[-3000:]}"
                assert time.monotonic() < end, f"round {round_}: the SIGHUP after the burst did not reload " \
                                               f"within {RELOADED_WITHIN:g} s\n{exporter.log()[-3000:]}"
                time.sleep(0.05)
        print(f"{ROUNDS} rounds of {BURST} SIGHUPs: {time.monotonic() - started:.1f} s")
        start = time.monotonic()
        exporter.proc.send_signal(signal.SIGTERM)
        exporter.proc.wait(STOPPED_WITHIN + 5)
        took = time.monotonic() - start
        assert took < STOPPED_WITHIN, took
        assert exporter.proc.returncode == 0, exporter.log()[-3000:]
        assert "shutting down" in exporter.log()


RELOAD_METRICS = {"storpath_config_last_reload_successful": "successful",
                  "storpath_config_last_reload_success_timestamp_seconds": "seconds"}


def reload_metrics(exporter) -> dict:
    found = {}
    for line in exporter.get("/metrics", timeout=10).text.splitlines():
        name, _, value = line.partition(" ")
        if name in RELOAD_METRICS:
            found[RELOAD_METRICS[name]] = float(value)
    return found


def reload_and_wait(exporter, message: str, count: int) -> None:
    exporter.proc.send_signal(signal.SIGHUP)
    end = time.monotonic() + RELOADED_WITHIN
    while exporter.log().count(message) < count:
        assert time.monotonic() < end and exporter.proc.poll() is None, exporter.log()[-3000:]
        time.sleep(0.05)


def test_the_last_reload_is_served_as_prometheus_serves_its_own(exporter_on, tmp_path):
    """storpath_config_last_reload_successful and ..._success_timestamp_seconds: set at start,
    0 after a reload that kept the running configuration, 1 and a new time after a good one."""
    config = tmp_path / "storpath.yml"
    collector_enabled(config, True)
    before_start = time.time()
    with exporter_on("am4-x570-firecuda", "healthy", f"--config.file={config}") as exporter:
        started = reload_metrics(exporter)
        assert started["successful"] == 1 and before_start <= started["seconds"] <= time.time(), started
        config.write_text("collectors:\n  md:\n    enabled: maybe\n")
        reload_and_wait(exporter, "reload failed", 1)
        failed = reload_metrics(exporter)
        assert failed == {"successful": 0, "seconds": started["seconds"]}, failed
        time.sleep(0.01)
        collector_enabled(config, False)
        reload_and_wait(exporter, "configuration reloaded", 1)
        good = reload_metrics(exporter)
        assert good["successful"] == 1 and good["seconds"] > started["seconds"], good
