"""The real `storpath serve` given a hostile config file: an alias bomb or a 50 MB file is
refused at start with a message and no traceback, and on SIGHUP the exporter keeps serving
with the configuration it had, still answers SIGTERM, and a later SIGHUP still reloads."""

from __future__ import annotations

import signal
import time

from tests.e2e.test_serve import storpath
from tests.unit.test_config_bounds import alias_bomb


def test_an_alias_bomb_is_refused_at_start(tmp_path):
    """Before: 30 s and 2.5 GB, then a MemoryError traceback."""
    config = tmp_path / "bomb.yml"
    config.write_text(alias_bomb("web.listen_address"))
    result = storpath("serve", f"--config.file={config}", "--web.listen-address=127.0.0.1:0")
    assert result.returncode == 2, result
    assert "storpath: configuration error:" in result.stderr and "anchors and aliases" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_50_mb_config_is_refused_at_start(tmp_path):
    config = tmp_path / "huge.yml"
    config.write_text("log:\n  level: info\n" + "# padding\n" * (5 << 20))
    result = storpath("serve", f"--config.file={config}", "--web.listen-address=127.0.0.1:0")
    assert result.returncode == 2, result
    assert "larger than 1 MiB" in result.stderr and "Traceback" not in result.stderr


def _wait_in_log(exporter, text, count=1, timeout=20.0):
    deadline = time.monotonic() + timeout
    while exporter.log().count(text) < count:
        assert exporter.proc.poll() is None, exporter.log()
        assert time.monotonic() < deadline, f"no {text!r} in:\n{exporter.log()}"
        time.sleep(0.1)


def test_sighup_with_an_alias_bomb_keeps_serving_and_signals_still_work(exporter_on, tmp_path):
    """Before: the reload spent 30 s and gigabytes, a MemoryError ended the thread that answers
    signals, and the exporter ignored SIGTERM and SIGHUP from then on."""
    config = tmp_path / "storpath.yml"
    config.write_text("collectors:\n  zfs:\n    enabled: false\n")
    with exporter_on("am4-x570-firecuda", "healthy", f"--config.file={config}") as exporter:
        assert 'collector="zfs"' not in exporter.metrics()
        config.write_text(alias_bomb("collectors.zfs.enabled"))
        exporter.proc.send_signal(signal.SIGHUP)
        _wait_in_log(exporter, "reload failed")
        log = exporter.log()
        assert "anchors and aliases" in log and "Traceback" not in log
        text = exporter.metrics()  # still serving, with the configuration it had
        assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text and 'collector="zfs"' not in text

        config.write_text("collectors:\n  zfs:\n    enabled: true\n")
        exporter.proc.send_signal(signal.SIGHUP)  # a second SIGHUP still reloads
        _wait_in_log(exporter, "configuration reloaded")
        assert 'storpath_scrape_collector_success{collector="zfs"} 1.0' in exporter.metrics()

        exporter.proc.send_signal(signal.SIGTERM)  # and SIGTERM still stops it
        assert exporter.proc.wait(15) == 0
        assert "msg=stopped" in exporter.log()
