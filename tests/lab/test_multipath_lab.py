"""NVMe native multipath and dm-multipath on a real kernel (lab tier), one boot of the
`multipath` machine:

1. healthy: the NVMe subsystem (QEMU nvme-subsys) has two live controllers sharing namespace
   1, the dm-multipath map (dmsetup's multipath target over the two sd paths of one SAS disk
   behind two HBAs) two active paths;
2. failed: the second controller's PCI function is removed while the host runs and the map's
   second path is failed (`dmsetup message ... fail_path`); the data keeps coming through the
   remaining paths (a pattern written before reads back through the head namespace);
3. restored: the map's path is reinstated (`reinstate_path`); the removed controller stays gone.

The exporter in the guest is scraped after each step, and each step is captured: the three
archives are the fixtures tests/lab/test_multipath_captures.py replays (written there with
STORPATH_LAB_UPDATE_CAPTURES=1, else into a temporary folder)."""

import os
import time

import pytest

import lab

pytestmark = pytest.mark.lab

MAP = "dm-0"
CONTROLLERS = (lab.MULTIPATH_HELPERS + "for c in /sys/class/nvme-subsystem/nvme-subsys*/nvme[0-9]*; do "
               "case $(basename $c) in *n*) ;; *) tr -d ' ' < $c/serial;; esac; done | sort | tr '\\n' ' '")


@pytest.fixture(scope="module")
def multipath_guest(lab_image, tmp_path_factory):
    from conftest import _boot
    guest = _boot("multipath", lab_image, tmp_path_factory)
    yield guest
    guest.stop()


def scrape_map(guest, active, timeout=120):
    """A scrape once the background dmsetup status shows ACTIVE active paths of the map."""
    end = time.monotonic() + timeout
    while True:
        s = lab.Scrape(lab.exporter_metrics(guest))
        if s.value("storpath_multipath_paths_active", device=MAP) == active and \
                s.series("storpath_multipath_path_state", device=MAP):
            return s
        if time.monotonic() > end:
            log = guest.run("tail -50 /tmp/storpath.log", check=False).stdout
            pytest.fail(f"map {MAP} never showed {active} active paths:\n{s.text[-3000:]}\n{log}")
        time.sleep(2)


def test_path_lost_and_restored(multipath_guest, tmp_path):
    g = multipath_guest
    dest = lab.CAPTURES_DIR if os.environ.get("STORPATH_LAB_UPDATE_CAPTURES") else tmp_path
    healthy, failed, restored = lab.MULTIPATH_CAPTURES
    assert g.sh("cat /sys/class/nvme-subsystem/nvme-subsys*/subsysnqn").strip() == lab.MULTIPATH_NQN
    assert g.sh(CONTROLLERS).split() == lab.MULTIPATH_NVME_SERIALS

    g.sh(lab.MULTIPATH_SETUP, timeout=300)
    s = scrape_map(g, active=2)
    [(labels, paths)] = s.series("storpath_nvme_subsystem_paths")
    subsystem = labels["subsystem"]
    assert paths == 2 and s.value("storpath_nvme_subsystem_paths_live", subsystem=subsystem) == 2
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    lab.capture(g, healthy, dest)

    g.sh(lab.MULTIPATH_FAIL, timeout=300)
    assert g.sh(CONTROLLERS).split() == lab.MULTIPATH_NVME_SERIALS[:1]
    # The other path keeps serving: the pattern reads back through the head namespace.
    assert g.sh(lab.MULTIPATH_READ_BACK, timeout=300).strip().endswith("served")
    s = scrape_map(g, active=1)
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 1
    lab.capture(g, failed, dest)

    g.sh(lab.MULTIPATH_RESTORE, timeout=300)
    s = scrape_map(g, active=2)
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 0
    lab.capture(g, restored, dest)
    for name in lab.MULTIPATH_CAPTURES:
        assert (dest / f"{name}.tar.gz").stat().st_size < 1024 * 1024
