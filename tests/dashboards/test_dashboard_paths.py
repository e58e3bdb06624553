"""The Host board's Paths and GPU links rows on fixture machines with known path faults, run
by a real Prometheus (tests/dashboards/conftest.py): an NVMe/TCP controller reconnecting
(dell-r750-nvmeof, tcp-path-dead), a dm-multipath path offline (supermicro-dualport-sas-shelf,
path-failed), a dual-ported drive reached through one port (path-missing), and an idle GPU
(desktop-z690-single-socket)."""

from __future__ import annotations

import pytest

from tests.dashboards.conftest import panel, query, substitute, table_rows

HOST = "storpath-host.json"


def _one(rows, **match):
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"{len(found)} rows match {match} in {rows}"
    return found[0]


def _stat(prom, title: str, instance: str) -> float:
    result = query(prom, substitute(panel(HOST, title)["targets"][0]["expr"], instance))
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_host_shows_the_nvme_path_reconnecting(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel(HOST, "NVMe subsystems: paths vs live"), "r750-tcp")
    tcp = _one(rows, subsystem="nvme-subsys0")
    assert (tcp["paths"], tcp["live"], tcp["verdict"]) == (2, 1, 1)  # "fewer paths serve"
    assert tcp["model"] == "NetApp ONTAP Controller" and tcp["iopolicy"] == "numa"
    fc = _one(rows, subsystem="nvme-subsys1")
    assert (fc["paths"], fc["live"], fc["verdict"]) == (4, 4, 0)
    paths = table_rows(fleet_prometheus, panel(HOST, "NVMe paths: each controller"), "r750-tcp")
    assert len(paths) == 6  # one row per controller: its state only
    lost = _one(paths, controller="nvme0")
    assert (lost["state"], lost["transport"]) == ("connecting", "tcp")
    assert lost["address"].startswith("traddr=192.168.10.11,trsvcid=4420")
    assert {r["state"] for r in paths if r["controller"] != "nvme0"} == {"live"}
    assert _stat(fleet_prometheus, "Multipath devices on fewer paths", "r750-tcp") == 1
    assert _stat(fleet_prometheus, "Multipath devices without a path", "r750-tcp") == 0
    assert _stat(fleet_prometheus, "Multipath devices on fewer paths", "supermicro") == 0


def test_host_shows_the_failed_multipath_path(fleet_prometheus):
    maps = table_rows(fleet_prometheus, panel(HOST, "Multipath maps: paths vs active vs failed"), "shelf-failed")
    assert {r["name"] for r in maps} == {"mpatha", "mpathb", "mpathc", "mpathd"}
    failed = _one(maps, device="dm-3")
    assert (failed["name"], failed["paths"], failed["active"], failed["failed"], failed["verdict"]) == (
        "mpathd", 2, 1, 1, 1)
    assert {(r["paths"], r["active"], r["failed"], r["verdict"]) for r in maps if r["device"] != "dm-3"} == {
        (2, 2, 0, 0)}
    assert {r["unknown"] for r in maps} == {0}  # dmsetup judged every path
    paths = table_rows(fleet_prometheus, panel(HOST, "Multipath paths: each path"), "shelf-failed")
    assert len(paths) == 8
    row = _one(paths, device="dm-3", path="sdh")
    assert (row["state"], row["failed in map"], row["basis"]) == ("offline", 1, "dmsetup")
    assert {(r["state"], r["failed in map"]) for r in paths if r["path"] != "sdh"} == {("running", 0)}
    assert _stat(fleet_prometheus, "Failed multipath paths", "shelf-failed") == 1
    assert _stat(fleet_prometheus, "Multipath devices on fewer paths", "shelf-failed") == 1
    assert _stat(fleet_prometheus, "Failed multipath paths", "shelf-missing") == 0


def test_host_shows_the_drive_missing_a_path(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel(HOST, "Dual-ported drives: paths"), "shelf-missing")
    assert len(rows) == 4
    missing = _one(rows, wwid="naa.5000cca2910a7c20")
    assert (missing["model"], missing["paths"], missing["peers' paths"], missing["verdict"]) == (
        "HGST HUH721212AL5200", 1, 2, 1)
    assert {(r["paths"], r["verdict"]) for r in rows if r is not missing} == {(2, 0)}
    assert _stat(fleet_prometheus, "Dual-ported drives missing a path", "shelf-missing") == 1
    assert _stat(fleet_prometheus, "Dual-ported drives missing a path", "shelf-failed") == 0


def test_host_shows_the_idle_gpu_against_its_link(fleet_prometheus):
    """The Z690's GPU idles at 2.5 GT/s x16 behind a Gen4 x16 port: the highest speed seen is
    below expected (the board says so; the alerts wait for the GPU to work), the width is not."""
    rows = table_rows(fleet_prometheus, panel(HOST, "GPU links: highest"), "z690-gpu")
    gpu = _one(rows, address="0000:01:00.0")
    assert gpu["pci_bus_id"] == "00000000:01:00.0"
    assert (gpu["speed now"], gpu["highest speed"], gpu["expected speed"]) == (2.5, 2.5, 16)
    assert (gpu["highest lanes"], gpu["expected lanes"]) == (16, 16)
    assert (gpu["speed"], gpu["lanes"]) == (1, 0)
    assert len(rows) == 1  # the board's other PCIe functions are no GPUs
    graph = panel(HOST, "GPU link speed")
    values = {t["refId"]: [float(r["value"][1]) for r in query(fleet_prometheus, substitute(t["expr"], "z690-gpu"))]
              for t in graph["targets"]}
    assert values == {"A": [pytest.approx(2.5)], "B": [pytest.approx(16)]}
    assert table_rows(fleet_prometheus, panel(HOST, "GPU links: highest"), "supermicro") == []


def test_pcie_tree_leaves_the_idle_gpu_to_the_gpu_links_row(fleet_prometheus):
    """The RTX 3060 and its root port at 2.5 GT/s of 16: "GPU link idle" (9), not "speed below
    expected" (1); every other link end of the Z690 at expected, and the x2 link still below."""
    tree = table_rows(fleet_prometheus, panel(HOST, "PCIe tree"), "z690-gpu")
    states = {r["address"]: r["link"] for r in tree}
    assert states.pop("0000:01:00.0") == 9 and states.pop("0000:00:01.0") == 9
    assert set(states.values()) == {0}
    x2 = table_rows(fleet_prometheus, panel(HOST, "PCIe tree"), "am4-x2")
    assert _one(x2, address="0000:05:00.0")["link"] == 2  # "lanes below expected"
