"""NVMe native multipath and dm-multipath on a real kernel (lab tier), one boot of the
`multipath` machine:

1. healthy: the PCIe NVMe subsystem (QEMU nvme-subsys) has two live controllers sharing
   namespace 1, an NVMe/TCP subsystem (the kernel's nvmet target on two loopback ports) two
   live tcp paths, the dm-multipath map (dmsetup's multipath target over the two sd paths of one SAS disk
   behind two HBAs) two active paths;
2. failed: the second PCIe controller's PCI function is removed while the host runs (the
   kernel deletes the controller: the subsystem lists one path), the target stops exporting
   the tcp subsystem on its second port (the host's controller there stays listed,
   reconnecting: paths 2, live 1) and the map's second path is failed (`dmsetup message ... fail_path`); the data keeps coming through the
   remaining paths (a pattern written before reads back through the head namespace);
3. restored: the map's path is reinstated (`reinstate_path`), the tcp port exports the
   subsystem again and the host reconnects; the removed PCIe controller stays gone.

The exporter in the guest is scraped after each step, and each step is captured: the three
archives are the fixtures tests/lab/test_multipath_captures.py replays (written there with
STORPATH_LAB_UPDATE_CAPTURES=1, else into a temporary folder)."""

import os

import pytest

import lab

pytestmark = pytest.mark.lab

MAP = "dm-0"
# The root ports of the PCIe subsystem's controllers.
CONTROLLERS = (lab.MULTIPATH_HELPERS + "for d in /sys/class/nvme-subsystem/nvme-subsys*; do "
               "[ \"$(cat $d/subsysnqn)\" = $PCI_NQN ] || continue; for c in $d/nvme[0-9]*; do "
               "case $(basename $c) in nvme[0-9]*n*) ;; *) port_of $(basename $c);; esac; done; done | sort | tr '\\n' ' '")


@pytest.fixture(scope="module")
def multipath_guest(lab_image, tmp_path_factory):
    from conftest import _boot
    guest = _boot("multipath", lab_image, tmp_path_factory)
    yield guest
    guest.stop()


def scrape_paths(guest, active, tcp_live, timeout=120):
    """A scrape once the background dmsetup status shows ACTIVE active paths of the map and
    the tcp subsystem TCP_LIVE live paths."""
    return lab.scrape_until(
        guest, lambda s: (s.value("storpath_multipath_paths_active", device=MAP) == active
                          and s.series("storpath_multipath_path_state", device=MAP) and tcp_paths(s) == (2, tcp_live)),
        timeout, f"{active} active map paths and {tcp_live} live tcp paths")


def tcp_subsystem(s):
    [labels] = [l for l in s.label_sets("storpath_nvme_subsystem_info") if l.get("nqn") == lab.MULTIPATH_TCP_NQN]
    return labels["subsystem"]


def tcp_paths(s):
    subs = [l for l in s.label_sets("storpath_nvme_subsystem_info") if l.get("nqn") == lab.MULTIPATH_TCP_NQN]
    if not subs:
        return None
    sub = subs[0]["subsystem"]
    return (s.value("storpath_nvme_subsystem_paths", subsystem=sub),
            s.value("storpath_nvme_subsystem_paths_live", subsystem=sub))


def test_path_lost_and_restored(multipath_guest, tmp_path):
    g = multipath_guest
    dest = lab.CAPTURES_DIR if os.environ.get("STORPATH_LAB_UPDATE_CAPTURES") else tmp_path
    healthy, failed, restored = lab.MULTIPATH_CAPTURES
    assert g.sh("cat /sys/class/nvme-subsystem/nvme-subsys*/subsysnqn").strip() == lab.MULTIPATH_NQN
    assert g.sh(CONTROLLERS).split() == lab.MULTIPATH_NVME_PORTS

    g.sh(lab.MULTIPATH_SETUP, timeout=300)
    s = scrape_paths(g, active=2, tcp_live=2)
    assert sorted(v for _, v in s.series("storpath_nvme_subsystem_paths")) == [2, 2]
    assert sorted(v for _, v in s.series("storpath_nvme_subsystem_paths_live")) == [2, 2]
    assert tcp_paths(s) == (2, 2)
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    lab.capture(g, healthy, dest)

    g.sh(lab.MULTIPATH_FAIL, timeout=300)
    assert g.sh(CONTROLLERS).split() == lab.MULTIPATH_NVME_PORTS[:1]
    # The other path keeps serving: the pattern reads back through the head namespace.
    assert g.sh(lab.MULTIPATH_READ_BACK, timeout=300).strip().endswith("served")
    s = scrape_paths(g, active=1, tcp_live=1)
    assert tcp_paths(s) == (2, 1)
    down = [l for l, v in s.series("storpath_nvme_path_state", subsystem=tcp_subsystem(s))
            if v == 1 and l["state"] != "live"]
    assert len(down) == 1 and down[0]["transport"] == "tcp", down
    # check names the lost tcp controller and the map's failed path.
    report = g.run("python3 -m storpath check --json", check=False, timeout=300)
    assert report.rc in (1, 2), report.stdout[-3000:] + report.stderr[-3000:]
    assert down[0]["controller"] in report.stdout and "paths.nvme_degraded" in report.stdout, report.stdout
    assert "paths.map_degraded" in report.stdout, report.stdout
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 1
    lab.capture(g, failed, dest)

    g.sh(lab.MULTIPATH_RESTORE, timeout=300)
    s = scrape_paths(g, active=2, tcp_live=2)
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 0
    assert tcp_paths(s) == (2, 2)
    lab.capture(g, restored, dest)
    for name in lab.MULTIPATH_CAPTURES:
        assert (dest / f"{name}.tar.gz").stat().st_size < 1024 * 1024
