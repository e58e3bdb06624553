"""The inventory rules with a real Prometheus on a small fixture fleet: three Supermicro X10DRi
with a Hyper M.2 card (tests/fixtures/machines/supermicro-x10dri-hyperm2), two bifurcated and
one left at x16 (its `unbifurcated` twin). The twin's missing drives fire the fleet rules, the
healthy hosts raise nothing; then one NVMe drive's sysfs entries are taken out of a running
host's tree (a drive dropping off the bus): InventoryDevicesVanished fires naming it, and
resolves when the entries are put back.

storpath_host_info (make and model, which the fleet rules group by) comes from each exporter's
host collector, read from the fixture's DMI files.

Rules rendered by rules/generate.py with `for:` removed; Prometheus scrapes and evaluates every
second. About 40 s.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_exporter
from tests.fixtures import machines

from . import harness
from .test_alerts import write_rules

pytestmark = pytest.mark.integration

MACHINE = "supermicro-x10dri-hyperm2"
INVENTORY_ALERTS = {"InventoryDevicesVanished", "InventoryFewerDevicesThanModel", "InventoryStorageLanesBelowModel",
                    "InventoryBelowExpected"}
# The drive taken out of the running host: nvme1 (0000:04:00.0) below root port 0000:00:03.1.
REMOVED = {"address": "0000:04:00.0", "controller": "nvme1", "namespace": "nvme1n1", "serial": "S467NX0M401235B"}


def _take_out(sys_root: Path, parking: Path) -> list:
    """Move the drive's PCI function and every link to it (bus, class/nvme, class/block, block)
    out of the tree; return what to put back."""
    links = [f"bus/pci/devices/{REMOVED['address']}", f"bus/pci/drivers/nvme/{REMOVED['address']}",
             f"class/nvme/{REMOVED['controller']}", f"class/block/{REMOVED['namespace']}",
             f"block/{REMOVED['namespace']}"]
    saved = [(rel, os.readlink(sys_root / rel)) for rel in links if os.path.islink(sys_root / rel)]
    device_dir = Path(os.path.realpath(sys_root / f"bus/pci/devices/{REMOVED['address']}"))
    for rel, _ in saved:
        os.unlink(sys_root / rel)
    shutil.move(str(device_dir), str(parking / "device"))
    return [(device_dir, saved)]


def _put_back(sys_root: Path, parking: Path, taken) -> None:
    for device_dir, saved in taken:
        shutil.move(str(parking / "device"), str(device_dir))
        for rel, target in saved:
            os.symlink(target, sys_root / rel)


def _alerts(prometheus, state="firing") -> dict:
    return {(a["labels"]["alertname"], a["labels"]["instance"], a["labels"].get("kind", "")): a
            for a in prometheus.alerts() if a["state"] == state}


def test_fleet_twin_and_a_drive_that_drops_off(backend, tmp_path):
    roots = {}
    for name, variant in (("sm1", "healthy"), ("sm2", "healthy"), ("sm3", "unbifurcated")):
        root = tmp_path / name
        machines.load(MACHINE).build(str(root), variant)
        roots[name] = root
    rules_dir = tmp_path / "rules"
    write_rules(rules_dir)

    with run_exporter([f"--path.sysfs={roots['sm1']}/sys", f"--path.procfs={roots['sm1']}/proc",
                       f"--path.captured={roots['sm1']}/captured"], str(tmp_path)) as sm1, \
            run_exporter([f"--path.sysfs={roots['sm2']}/sys", f"--path.procfs={roots['sm2']}/proc",
                          f"--path.captured={roots['sm2']}/captured"], str(tmp_path)) as sm2, \
            run_exporter([f"--path.sysfs={roots['sm3']}/sys", f"--path.procfs={roots['sm3']}/proc",
                          f"--path.captured={roots['sm3']}/captured"], str(tmp_path)) as sm3:
        targets = {n: f"127.0.0.1:{e.port}" for n, e in (("sm1", sm1), ("sm2", sm2), ("sm3", sm3))}
        config = harness.prometheus_config({"storpath": list(targets.values())})
        prometheus = backend.prometheus(config, rules_dir=rules_dir)
        prometheus.wait_targets_up(["storpath"], timeout=60)

        def diagnostics() -> str:
            return (json.dumps(prometheus.alerts(), indent=1)[:4000] + "\n" + prometheus.logs()
                    + "\n" + sm1.log()[-2000:])

        # The unbifurcated twin: fewer NVMe controllers and fewer storage lanes than its model.
        twin = {("InventoryFewerDevicesThanModel", targets["sm3"], "nvme_controller"),
                ("InventoryStorageLanesBelowModel", targets["sm3"], "")}
        harness.wait_until(lambda: twin <= set(_alerts(prometheus)), 60, f"{twin} firing",
                           diagnostics=diagnostics)
        # Let the rules run on several scrapes: nothing else may fire, on any host.
        harness.wait_until(lambda: prometheus.query(
            "count_over_time(model:storpath_inventory_hosts:count[1m]) >= 5"), 60, "five evaluations",
            diagnostics=diagnostics)
        firing = _alerts(prometheus)
        assert set(firing) == twin, diagnostics()
        lanes = firing[("InventoryStorageLanesBelowModel", targets["sm3"], "")]["annotations"]["description"]
        assert "on x4 in all, where the 3 hosts of its model have x16 (median)" in lanes, lanes
        fewer = firing[("InventoryFewerDevicesThanModel", targets["sm3"], "nvme_controller")]
        assert "has 1 nvme_controller where the 3 hosts of its model have 4 (median)" in \
            fewer["annotations"]["description"], fewer

        # nvme1 drops off the bus of the running sm1.
        parking = tmp_path / "parked"
        parking.mkdir()
        taken = _take_out(roots["sm1"] / "sys", parking)
        vanished = {("InventoryDevicesVanished", targets["sm1"], "nvme_controller"),
                    ("InventoryDevicesVanished", targets["sm1"], "nvme_namespace")}
        harness.wait_until(lambda: vanished <= set(_alerts(prometheus)), 60, f"{vanished} firing",
                           diagnostics=diagnostics)
        alert = _alerts(prometheus)[("InventoryDevicesVanished", targets["sm1"], "nvme_controller")]
        description = alert["annotations"]["description"]
        assert (f"has 1 nvme_controller device(s) fewer than in the last 1d (4 then). Gone: nvme1 "
                f"(Samsung SSD 970 EVO 1TB) serial {REMOVED['serial']} at {REMOVED['address']}") in description, \
            description
        namespace = _alerts(prometheus)[("InventoryDevicesVanished", targets["sm1"], "nvme_namespace")]
        assert "Gone: nvme1n1 " in namespace["annotations"]["description"], namespace
        # Three of four left on sm1: the median of (3, 4, 1) is 3, so only the twin stays below its model.
        assert {k for k in _alerts(prometheus) if k[0] in INVENTORY_ALERTS} == twin | vanished, diagnostics()

        # Put back: the alerts resolve; the twin's stay.
        _put_back(roots["sm1"] / "sys", parking, taken)
        harness.wait_until(lambda: not vanished & set(_alerts(prometheus)), 60, f"{vanished} resolved",
                           diagnostics=diagnostics)
        assert {k for k in _alerts(prometheus) if k[0] in INVENTORY_ALERTS} == twin, diagnostics()
        assert float(prometheus.query(
            f'storpath_inventory_devices{{instance="{targets["sm1"]}",kind="nvme_controller"}}')[0]["value"][1]) \
            == 4
