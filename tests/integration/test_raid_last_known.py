"""A hung storcli in a real Prometheus: the exporter runs a fake storcli (a shell script answering
as storcli does, from tests/fixtures/builders_raid.py) that reports volume 0/0 degraded, then
hangs on every later pass. Prometheus, scraping every second with rules/raid.yml (rendered
with `for: 0s` and the stale age at 5 s), must keep the volume degraded through every hung
pass, with no gap, and fire RaidToolResultsStale and RaidVolumeDegraded together."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml

from tests.fixtures import builders_raid as build

from . import harness

pytestmark = pytest.mark.integration


def _storcli(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "controllers.json").write_text(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0),
                                                                    "SAS-12G"))
    (out / "drives.json").write_text(build.storcli_drives(0, [build.StorcliDrive(32, 0, did=0)]))
    (out / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Dgrd")]))
    script = tmp_path / "storcli"
    script.write_text(f"""#!/bin/sh
if [ -e {out}/hang ]; then sleep 600; fi
case "$1" in
  /call) cat {out}/controllers.json ;;
  /call/eall/sall) cat {out}/drives.json ;;
  /call/vall) cat {out}/volumes.json ;;
esac
""")
    script.chmod(0o755)
    return script, out / "hang"


def _value(prom, expr):
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else None


def test_a_hung_storcli_keeps_the_degraded_volume_in_prometheus_and_its_age_alert_fires(
        process_binaries, require_exporter, tmp_path):
    backend = harness.ProcessBackend(tmp_path / "processes")
    try:
        sysfs = tmp_path / "sys"
        (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
        (tmp_path / "dev").mkdir()
        storcli, hang = _storcli(tmp_path)
        config = tmp_path / "storpath.yml"
        config.write_text(yaml.safe_dump({"collectors": {"raid": {
            "storcli_path": str(storcli), "megacli_path": str(tmp_path / "MegaCli"), "interval": "10s",
            "timeout": "1s", "startup_wait": "5s"}}}))
        exporter = backend.host_exporter(sysfs, dev=tmp_path / "dev", extra_args=[f"--config.file={config}"])
        rules = tmp_path / "rules"
        rules.mkdir()
        site = tmp_path / "site.yml"
        site.write_text(yaml.safe_dump({"raid": {"results_stale_after": "5s"}}))
        subprocess.run([sys.executable, str(harness.REPO / "rules/generate.py"), "--config", str(site),
                        "--for", "0s", "--out", str(rules)], check=True, capture_output=True)
        prom = backend.prometheus(harness.prometheus_config({"storpath": [exporter.address]}), rules_dir=rules)
        degraded = 'storpath_raid_volume_state{controller="storcli/c0",volume="0/0",state="degraded"}'
        harness.wait_until(lambda: _value(prom, degraded) == 1, 60, "the degraded volume in Prometheus")
        harness.wait_until(lambda: _value(prom, 'storpath_raid_tool_up{tool="storcli"}') == 1, 30, "storcli up")
        hang.write_text("")
        harness.wait_until(lambda: _value(prom, 'storpath_raid_tool_up{tool="storcli"}') == 0, 60,
                           "storcli down (hung, killed at its timeout)")
        hung_since = time.time()
        # Two more hung passes (10 s apart): the volume stays degraded in every scrape.
        harness.wait_until(lambda: time.time() - hung_since > 22, 30, "two more passes", interval=1)
        window = f"{int(time.time() - hung_since)}s"
        assert _value(prom, f"min_over_time({degraded}[{window}])") == 1
        samples = _value(prom, f"count_over_time({degraded}[{window}])")
        assert samples is not None and samples >= int(window[:-1]) - 3  # a sample each second: no gap
        alerts = {a["labels"]["alertname"]: a for a in prom.alerts() if a.get("state") == "firing"}
        assert "RaidToolResultsStale" in alerts and alerts["RaidToolResultsStale"]["labels"]["tool"] == "storcli"
        assert "RaidVolumeDegraded" in alerts
    finally:
        backend.close()


def test_a_controller_listed_twice_optimal_then_degraded_is_stored_degraded(process_binaries, require_exporter,
                                                                           tmp_path):
    """storcli's JSON with controller 0 twice, volume 0/0 Optl then Dgrd: one series each, and the
    one Prometheus stores says degraded (with duplicate series it stored the first: optimal)."""
    backend = harness.ProcessBackend(tmp_path / "processes")
    try:
        one = json.loads(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Optl")]))
        two = json.loads(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Dgrd")]))
        ctrl = json.loads(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0), "SAS-12G"))
        captured = tmp_path / "captured/storcli"
        captured.mkdir(parents=True)
        (captured / "volumes.json").write_text(json.dumps({"Controllers": one["Controllers"] + two["Controllers"]}))
        (captured / "controllers.json").write_text(json.dumps({"Controllers": ctrl["Controllers"] * 2}))
        sysfs = tmp_path / "sys"
        sysfs.mkdir()
        exporter = backend.host_exporter(sysfs, extra_args=[f"--path.captured={tmp_path / 'captured'}"])
        prom = backend.prometheus(harness.prometheus_config({"storpath": [exporter.address]}))
        volume = 'storpath_raid_volume_state{controller="storcli/c0",volume="0/0",state="%s"}'
        harness.wait_until(lambda: _value(prom, volume % "degraded") is not None, 60, "the volume in Prometheus")
        assert _value(prom, volume % "degraded") == 1
        assert _value(prom, volume % "optimal") == 0
        assert _value(prom, 'count(storpath_raid_controller_info{controller="storcli/c0"})') == 1
    finally:
        backend.close()
