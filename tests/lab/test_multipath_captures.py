"""The multipath lab captures replayed without QEMU (tier 2): a real 6.1 kernel's sysfs of
an NVMe subsystem with two controllers sharing a namespace (QEMU nvme-subsys) before and
after one controller's PCI function was removed, of an NVMe/TCP subsystem (the kernel's
nvmet target over the loopback, two ports) with its second path lost and restored, and of a
dm-multipath map over the two sd
paths of one SAS disk (two HBAs) healthy, with one path failed (`dmsetup message ...
fail_path`) and reinstated. Made by tests/lab/test_multipath_lab.py (or
`python3 tests/lab/lab.py capture multipath`); see tests/lab/README.md.

The paths rules (rules/paths.yml) run in promtool over the captures' own series, healthy,
then failed, then restored."""

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

import lab
from tests.conftest import ROOT, run_exporter

CAPTURES = Path(__file__).resolve().parent / "captures"
HEALTHY, FAILED, RESTORED = lab.MULTIPATH_CAPTURES
MAP = "dm-0"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    out = {}
    for name in lab.MULTIPATH_CAPTURES:
        root = tmp_path_factory.mktemp(name)
        with tarfile.open(CAPTURES / f"{name}.tar.gz") as tar:
            tar.extractall(root)
        out[name] = root
    return out


def _args(root):
    return [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
            f"--path.dev={root}/dev"]


@pytest.fixture(scope="module")
def scrapes(roots, tmp_path_factory):
    out = {}
    for name, root in roots.items():
        with run_exporter(_args(root), str(tmp_path_factory.mktemp(f"{name}-exporter"))) as exporter:
            text = exporter.metrics()
            # dmsetup status is read in a background task.
            deadline = time.monotonic() + 20
            while "storpath_multipath_path_state{" not in text and time.monotonic() < deadline:
                time.sleep(0.2)
                text = exporter.metrics()
        out[name] = lab.Scrape(text)
    return out


def _check(root):
    done = subprocess.run([sys.executable, "-m", "storpath", "check", "--json", *_args(root)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(Path(ROOT) / "exporter"), "PATH": "/usr/bin:/bin"})
    return done.returncode, json.loads(done.stdout)


def test_captures_are_small(roots):
    for name in lab.MULTIPATH_CAPTURES:
        assert (CAPTURES / f"{name}.tar.gz").stat().st_size < 1024 * 1024


@pytest.mark.parametrize("name", lab.MULTIPATH_CAPTURES)
def test_collectors_succeed(name, scrapes):
    failed = [l["collector"] for l, v in scrapes[name].series("storpath_scrape_collector_success") if v != 1]
    assert not failed


def subsystem_of(s, nqn):
    [labels] = [l for l in s.label_sets("storpath_nvme_subsystem_info") if l["nqn"] == nqn]
    return labels["subsystem"]


def live_paths(s, subsystem):
    return sorted((l["transport"], l["state"]) for l, v in s.series("storpath_nvme_path_state", subsystem=subsystem)
                  if v == 1)


def test_healthy_subsystems_have_two_live_paths(scrapes):
    s = scrapes[HEALTHY]
    for nqn, transport in ((lab.MULTIPATH_NQN, "pcie"), (lab.MULTIPATH_TCP_NQN, "tcp")):
        sub = subsystem_of(s, nqn)
        assert s.value("storpath_nvme_subsystem_paths", subsystem=sub) == 2
        assert s.value("storpath_nvme_subsystem_paths_live", subsystem=sub) == 2
        assert live_paths(s, sub) == [(transport, "live")] * 2


def test_lost_tcp_path_stays_listed_not_live(scrapes):
    """The host keeps the controller of the lost tcp path, reconnecting: paths 2, live 1."""
    s = scrapes[FAILED]
    sub = subsystem_of(s, lab.MULTIPATH_TCP_NQN)
    assert s.value("storpath_nvme_subsystem_paths", subsystem=sub) == 2
    assert s.value("storpath_nvme_subsystem_paths_live", subsystem=sub) == 1
    states = live_paths(s, sub)
    assert ("tcp", "live") in states and len(states) == 2
    assert [st for _, st in states if st != "live"][0] in ("connecting", "resetting"), states
    s = scrapes[RESTORED]
    sub = subsystem_of(s, lab.MULTIPATH_TCP_NQN)
    assert s.value("storpath_nvme_subsystem_paths_live", subsystem=sub) == 2


@pytest.mark.parametrize("name", [HEALTHY, RESTORED])
def test_healthy_and_restored_map_has_two_active_paths(scrapes, name):
    s = scrapes[name]
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    assert s.value("storpath_multipath_paths_active", device=MAP) == 2
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 0


def test_failed_map_counts_the_failed_path(scrapes):
    s = scrapes[FAILED]
    assert s.value("storpath_multipath_paths", device=MAP) == 2
    assert s.value("storpath_multipath_paths_active", device=MAP) == 1
    assert s.value("storpath_multipath_paths_failed", device=MAP) == 1
    # dm-mpath's own verdict (dmsetup status: 8:16 F); the SCSI device itself stays running.
    verdicts = {l["path"]: (l["basis"], v) for l, v in s.series("storpath_multipath_path_failed", device=MAP)}
    assert verdicts == {"sda": ("dmsetup", 0), "sdb": ("dmsetup", 1)}, verdicts
    assert {l["path"]: l["state"] for l, v in s.series("storpath_multipath_path_state", device=MAP) if v == 1} \
        == {"sda": "running", "sdb": "running"}


def test_removed_controller_leaves_the_subsystem(roots):
    """The kernel deletes a PCIe controller whose function is removed: the subsystem lists one
    path afterwards, the surviving one (behind the first root port)."""
    def controllers(root):
        classdir = root / "sys/class/nvme-subsystem"
        [subsys] = [p for p in classdir.iterdir() if (p / "subsysnqn").read_text().strip() == lab.MULTIPATH_NQN]
        names = [p.name for p in subsys.iterdir() if re.fullmatch(r"nvme\d+", p.name)]
        # The class link: ../../devices/pci0000:00/<root port>/<endpoint>/nvme/<controller>.
        return sorted(os.readlink(root / "sys/class/nvme" / n).split("/")[-4] for n in names)
    assert controllers(roots[HEALTHY]) == lab.MULTIPATH_NVME_PORTS
    assert controllers(roots[FAILED]) == lab.MULTIPATH_NVME_PORTS[:1]


def test_removed_pcie_controller_leaves_the_families_for_the_rule_to_see(scrapes):
    """The PCIe subsystem that lost a controller is, to the exporter, a local drive of one
    controller again: its path families go (analysis.paths.multipathed). StoragePathsMissing
    sees it through the NQN it had (rules/paths.yml's instance_nqn recording rule; the promtool
    case "a dual-ported PCIe NVMe drive loses one port")."""
    healthy = scrapes[HEALTHY]
    sub = subsystem_of(healthy, lab.MULTIPATH_NQN)
    assert healthy.value("storpath_nvme_subsystem_paths", subsystem=sub) == 2
    failed = scrapes[FAILED]
    assert not [l for l, _ in failed.series("storpath_nvme_subsystem_info") if l.get("nqn") == lab.MULTIPATH_NQN]
    assert failed.value("storpath_scrape_collector_success", collector="nvme_subsystem") == 1


def test_check_names_the_lost_paths(roots, scrapes):
    s = scrapes[FAILED]
    sub = subsystem_of(s, lab.MULTIPATH_TCP_NQN)
    [lost] = [l["controller"] for l, v in s.series("storpath_nvme_path_state", subsystem=sub)
              if v == 1 and l["state"] != "live"]
    rc, report = _check(roots[FAILED])
    text = json.dumps(report)
    assert rc in (1, 2)
    # The map's failed path (dmsetup status) though its SCSI device still runs.
    maps = [f for f in _findings(report) if f.get("kind") == "paths.map_degraded"]
    assert len(maps) == 1 and "sdb" in maps[0]["title"], text[:3000]
    nvme = [f for f in _findings(report) if f.get("kind") == "paths.nvme_degraded"]
    assert len(nvme) == 1 and lost in json.dumps(nvme), nvme
    rc, report = _check(roots[RESTORED])
    assert not [f for f in _findings(report) if str(f.get("kind", "")).startswith("paths.")]


def _findings(report):
    """Every finding object of check's JSON report, wherever it nests."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            if "kind" in x and "severity" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(report)
    return found


@pytest.fixture
def harness_rules(tmp_path):
    """The integration harness and a copy of rules/ with every `for:` removed; skips naming
    what is missing where Prometheus or promtool is not installed."""
    from tests.integration import harness
    try:
        harness.check_binaries()
    except harness.Missing as exc:
        pytest.skip(str(exc))
    rules = tmp_path / "rules"
    harness.copy_rules(rules)
    return harness, rules


def _watched(harness, backend, root, rules):
    """The exporter on `root` and a Prometheus with `rules` scraping it, its target up."""
    exporter = backend.host_exporter(root / "sys", root / "proc", root / "dev",
                                     extra_args=[f"--path.captured={root}/captured"])
    prom = backend.prometheus(harness.prometheus_config({"storpath": [exporter.address]}), rules)
    prom.wait_targets_up(["storpath"])
    return prom


@pytest.mark.integration
def test_real_prometheus_fires_on_the_failed_capture(roots, scrapes, tmp_path, harness_rules):
    """A real Prometheus with rules/ (every `for:` removed) scraping the exporter on the failed
    capture: the map and the tcp subsystem, each running on one of its two paths, raise
    StoragePathsDegraded, and no path alert fires for anything else; on the restored capture none fires."""
    harness, rules = harness_rules
    path_alerts = {"StoragePathLost", "StoragePathsDegraded", "StoragePathsMissing"}

    def firing(name):
        backend = harness.ProcessBackend(tmp_path / name)
        try:
            prom = _watched(harness, backend, roots[name], rules)
            # Two evaluations after the background dmsetup task has run.
            harness.wait_until(lambda: prom.query("storpath_multipath_path_state"), 30, "map path states")
            time.sleep(3)
            return sorted((a["labels"]["alertname"], a["labels"].get("device") or a["labels"].get("subsystem"))
                          for a in prom.alerts() if a["state"] == "firing" and a["labels"]["alertname"] in path_alerts)
        finally:
            backend.close()

    tcp = subsystem_of(scrapes[FAILED], lab.MULTIPATH_TCP_NQN)
    assert firing(FAILED) == sorted([("StoragePathsDegraded", MAP), ("StoragePathsDegraded", tcp)])
    assert firing(RESTORED) == []


@pytest.mark.integration
def test_real_prometheus_fires_when_a_pcie_controller_leaves_a_running_host(roots, scrapes, tmp_path, harness_rules):
    """One exporter and one Prometheus, the machine changing under them as the lab's did: the
    healthy capture, then the failed one (the PCIe controller's function removed while the
    host runs). The subsystem is a local drive of one controller afterwards and leaves the
    path families, so StoragePathsMissing fires by its NQN (the rule's recording of paths per
    NQN); while the host stays healthy it does not."""
    harness, rules = harness_rules
    live = tmp_path / "live"  # the roots the exporter reads: a link, moved from one capture to the other
    live.symlink_to(roots[HEALTHY])
    backend = harness.ProcessBackend(tmp_path / "run")
    try:
        prom = _watched(harness, backend, live, rules)
        recorded = f'instance_nqn:storpath_nvme_subsystem_paths:max{{nqn="{lab.MULTIPATH_NQN}"}}'
        harness.wait_until(lambda: [r for r in prom.query(recorded) if r["value"][1] == "2"], 30,
                           "two paths recorded for the dual-controller subsystem")

        def missing():
            return [a for a in prom.alerts() if a["labels"]["alertname"] == "StoragePathsMissing"
                    and a["state"] == "firing"]
        time.sleep(3)  # evaluations on the healthy host: nothing is missing
        assert missing() == []
        moved = tmp_path / "moved"
        moved.symlink_to(roots[FAILED])
        os.replace(moved, live)  # the function is removed while the exporter runs
        fired = harness.wait_until(missing, 30, "StoragePathsMissing after the controller left")
        assert [a["labels"].get("nqn") for a in fired] == [lab.MULTIPATH_NQN], fired
        assert "2" in fired[0]["annotations"]["description"], fired[0]["annotations"]
    finally:
        backend.close()
