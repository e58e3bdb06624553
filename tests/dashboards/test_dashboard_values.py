"""What the dashboards show on a fleet of fixture machines with known faults, run by a real
Prometheus (tests/dashboards/conftest.py): every query runs and returns data where the fleet
has it, and specific panels show the known numbers (the downgraded link's current and
expected bandwidth, the 512-byte LBA namespace, the degraded md array...)."""

from __future__ import annotations

import re
import time

import pytest

from tests.dashboards.conftest import DASH_DIR, FLEET, HISTORY_READ_RATE, load, panel, query, substitute, table_rows

HOSTS = [instance for instance, _, _ in FLEET]


def _one(rows, **match):
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"{len(found)} rows match {match} in {rows}"
    return found[0]


# ---- every query -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["storpath-fleet.json", "storpath-capacity.json"])
def test_every_fleet_panel_query_returns_data(fleet_prometheus, name):
    empty = []
    for p in load(DASH_DIR / name)["panels"]:
        for t in p.get("targets", []):
            expr = substitute(t["expr"])
            if not query(fleet_prometheus, expr):
                empty.append(f"{p['title']} [{t['refId']}]: {expr}")
            if p["type"] == "timeseries":
                end = time.time()
                query(fleet_prometheus, expr, "query_range", start=end - 1800, end=end, step=60)
    assert not empty, "queries without data on a fleet that has it:\n" + "\n".join(empty)


def test_every_host_panel_query_runs_on_every_host_and_finds_data_somewhere(fleet_prometheus):
    """The Host board, with each fixture host selected in turn: every query runs on every host,
    and each finds data on at least one (no single machine has SAS, SATA, md, ZFS and probes)."""
    found = {}
    for p in load(DASH_DIR / "storpath-host.json")["panels"]:
        for t in p.get("targets", []):
            key = f"{p['title']} [{t['refId']}]"
            found[key] = [h for h in HOSTS if query(fleet_prometheus, substitute(t["expr"], h))]
    assert not [k for k, hosts in found.items() if not hosts], [k for k, hosts in found.items() if not hosts]
    # and the healthy reference machine has data in the panels that apply to every machine
    assert "supermicro" in found["Storage devices: PCIe link, current vs expected vs device max [A]"]


@pytest.mark.parametrize("name", ["storpath-fleet.json", "storpath-host.json", "storpath-capacity.json"])
def test_every_variable_resolves(fleet_prometheus, name):
    import requests

    for var in load(DASH_DIR / name)["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.match(r"label_values\((.+), (\w+)\)$", var["query"])
        assert m, var["query"]
        selector, label = substitute(m.group(1), "am4-x2"), m.group(2)
        body = requests.get(f"{fleet_prometheus.url}/api/v1/series", params={"match[]": selector}, timeout=30).json()
        values = {s.get(label) for s in body["data"]} - {None}
        assert values, f"variable {var['name']} has no values ({selector})"
        if var["name"] == "instance":
            assert values == set(HOSTS)


def test_link_change_annotation_finds_the_change(fleet_prometheus):
    host = load(DASH_DIR / "storpath-host.json")
    queries = [a for a in host["annotations"]["list"] if "expr" in a]
    assert queries
    for annotation in queries:
        result = query(fleet_prometheus, substitute(annotation["expr"], "am4-x2"))
        assert {r["metric"].get("address") for r in result} == {"0000:05:00.0"}, result


# ---- known numbers: Host board -------------------------------------------------------------
def test_host_shows_the_x2_link_at_half_its_bandwidth(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "Storage devices"), "am4-x2")
    assert {r["device"] for r in rows} == {"nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "sda"}
    row = _one(rows, device="nvme1n1")
    assert (row["speed"], row["expected speed"], row["device max speed"]) == (16, 16, 16)
    assert (row["lanes"], row["expected lanes"], row["device max lanes"]) == (2, 4, 4)
    assert row["usable bandwidth"] == pytest.approx(3.938e9, rel=1e-3)
    assert row["expected bandwidth"] == pytest.approx(7.877e9, rel=1e-3)
    assert row["link"] == 2 and row["placement"] == 0  # "lanes below expected"
    healthy = _one(rows, device="nvme0n1")
    assert (healthy["lanes"], healthy["link"], healthy["usable bandwidth"]) == (4, 0, row["expected bandwidth"])
    assert "instance" not in row and "job" not in row  # one host: no column that repeats it


def test_host_shows_the_drive_its_port_holds_back(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "Storage devices"), "am4-gen3")
    row = _one(rows, device="nvme3n1")
    assert (row["speed"], row["expected speed"], row["device max speed"]) == (8, 8, 16)
    assert row["link"] == 0 and row["placement"] == 1  # trained as expected; "port limits device"
    tree = table_rows(fleet_prometheus, panel("storpath-host.json", "PCIe tree"), "am4-gen3")
    port = _one(tree, address="0000:00:03.4")
    assert port["port_type"] == "root_port" and port["device max speed"] == 8
    assert _one(tree, address="0000:07:00.0")["upstream"] == "0000:00:03.4"


def test_host_shows_the_512_byte_namespaces(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "NVMe namespaces"), "am4-x2")
    row = _one(rows, device="nvme1n1")
    assert (row["LBA size"], row["best LBA size"], row["format"]) == (512, 4096, 1)
    assert row["model"].startswith("Seagate FireCuda 530")
    epyc = table_rows(fleet_prometheus, panel("storpath-host.json", "NVMe namespaces"), "epyc")
    p5316 = [r for r in epyc if r["model"] == "INTEL SSDPF2NV153TZ"]
    assert len(p5316) == 4 and {(r["LBA size"], r["format"]) for r in p5316} == {(4096, 0)}  # at their best


def test_host_shows_the_degraded_mirror(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "md arrays"), "epyc")
    mirror = _one(rows, device="md1")
    assert (mirror["level"], mirror["disks"], mirror["degraded"]) == ("raid1", 2, 1)
    assert "degraded" not in _one(rows, device="md0")  # raid0 has no redundancy to lose
    members = table_rows(fleet_prometheus, panel("storpath-host.json", "md members"), "epyc")
    assert [m["member"] for m in members if m["device"] == "md1"] == ["sda"]
    stat = panel("storpath-host.json", "md arrays degraded")
    assert float(query(fleet_prometheus, substitute(stat["targets"][0]["expr"], "epyc"))[0]["value"][1]) == 1
    assert float(query(fleet_prometheus, substitute(stat["targets"][0]["expr"], "am4-x2"))[0]["value"][1]) == 0


def test_host_shows_the_sas_step_down(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "SAS PHYs: "), "dell")
    assert len(rows) == 8
    for row in rows:
        assert (row["negotiated"], row["minimum"], row["maximum"], row["hardware maximum"]) == (1.5, 1.5, 1.5, 3.0)
        assert row["rate"] == 1  # "below hardware maximum"


def test_host_shows_the_sata_link_held_low(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "SATA links"), "am4-sata")
    row = _one(rows, link="link1")
    assert (row["device"], row["speed"], row["libata limit"], row["limit"]) == ("sda", 3.0, 3.0, 1)


def test_host_shows_the_degraded_pool(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "ZFS pools"), "intel")
    pool = _one(rows, zpool="zpool1")
    assert pool["state"] == "degraded" and pool["used"] == pytest.approx(0.41, abs=0.005)
    assert (pool["ashift"], pool["expected ashift"]) == (13, 12) or pool["ashift"] >= pool["expected ashift"]
    assert _one(rows, zpool="zpool2")["state"] == "online"
    vdevs = table_rows(fleet_prometheus, panel("storpath-host.json", "ZFS vdevs not online"), "intel")
    assert {(v["vdev"], v["state"]) for v in vdevs} >= {("nvme5n1", "removed"), ("raidz2-0", "degraded")}


def test_host_shows_numa_placement(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "Block devices by NUMA node"), "epyc")
    assert {r["device"]: r["NUMA node"] for r in rows if r["device"].startswith("nvme")} == {
        "nvme0n1": 0, "nvme1n1": 1, "nvme2n1": 1, "nvme3n1": 1, "nvme4n1": 1}
    dell = table_rows(fleet_prometheus, panel("storpath-host.json", "Block devices by NUMA node"), "dell")
    assert {r["controller node"] for r in dell} == {-1}  # shown as "unknown"


def test_host_shows_the_hot_drive(fleet_prometheus):
    """Drive 2 of the carrier without its heatsink cover: 357 K (83.85 °C) over WCTEMP 355 K
    (81.85 °C), the temperature critical warning set; its neighbours at 318 K."""
    graph = panel("storpath-host.json", "NVMe composite temperature")
    by_ref = {t["refId"]: {r["metric"]["controller"]: float(r["value"][1])
                           for r in query(fleet_prometheus, substitute(t["expr"], "am4-hot"))}
              for t in graph["targets"]}
    assert by_ref["A"]["nvme1"] == pytest.approx(83.85)
    assert {c: v for c, v in by_ref["A"].items() if c != "nvme1"} == {
        c: pytest.approx(44.85) for c in by_ref["A"] if c != "nvme1"}
    assert by_ref["B"]["nvme1"] == pytest.approx(81.85) and by_ref["C"]["nvme1"] == pytest.approx(81.85)
    assert by_ref["A"]["nvme1"] > by_ref["C"]["nvme1"]
    warnings = table_rows(fleet_prometheus, panel("storpath-host.json", "NVMe critical warnings"), "am4-hot")
    assert [(r["controller"], r["bit"], r["set"]) for r in warnings] == [("nvme1", "temperature", 1)]
    assert table_rows(fleet_prometheus, panel("storpath-host.json", "NVMe critical warnings"), "am4-x2") == []
    spare = table_rows(fleet_prometheus, panel("storpath-host.json", "NVMe available spare"), "am4-hot")
    row = _one(spare, controller="nvme1")
    assert row["state"] == 0 and row["spare"] > row["threshold"]


def test_host_shows_the_misaligned_partition(fleet_prometheus):
    """sda1 starts at sector 63 (32256 bytes) of a 512e disk; sdb1 at 1 MiB is aligned."""
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", "Misaligned partitions"), "intel-misaligned")
    row = _one(rows, device="sda1")
    assert (row["disk"], row["boundary"], row["start"]) == ("sda", "physical_block", 63 * 512)
    assert {r["device"] for r in rows} == {"sda1"}
    assert table_rows(fleet_prometheus, panel("storpath-host.json", "Misaligned partitions"), "intel") == []


def test_host_shows_the_inventory(fleet_prometheus):
    kinds = table_rows(fleet_prometheus, panel("storpath-host.json", "Inventory: devices per kind"), "supermicro")
    assert _one(kinds, kind="nvme_controller")["devices"] == 4
    devices = table_rows(fleet_prometheus, panel("storpath-host.json", "Inventory: every storage device"), "supermicro")
    controllers = [r for r in devices if r["kind"] == "nvme_controller"]
    assert len(controllers) == 4 and all(r["address"] and r["model"] for r in controllers)
    assert "present" not in controllers[0] and "instance" not in controllers[0]


# ---- known numbers: Fleet and Capacity --------------------------------------------------------
def test_fleet_lists_the_x2_link_with_its_host(fleet_prometheus):
    rows = table_rows(fleet_prometheus, panel("storpath-fleet.json", "Worst offenders: links below"))
    row = _one(rows, instance="am4-x2", address="0000:05:00.0")
    assert row["bandwidth lost"] == pytest.approx(3.938e9, rel=1e-3)
    # not the idle GPU (z690-gpu) nor its root port, nor the link capped as told (z690-capped)
    assert {r["instance"] for r in rows} == {"am4-x2"}
    placement = table_rows(fleet_prometheus, panel("storpath-fleet.json", "Worst offenders: devices below"))
    assert ("am4-gen3", "0000:07:00.0") in {(r["instance"], r["address"]) for r in placement}
    degraded = table_rows(fleet_prometheus, panel("storpath-fleet.json", "Degraded arrays"))
    assert [(r["instance"], r["device"], r["degraded disks"]) for r in degraded] == [("epyc", "md1", 1)]


def test_capacity_shows_peak_reads_against_the_link(fleet_prometheus):
    """The history read every device at 200 MB/s: the x2 link's device used 200 MB/s of the
    7.88 GB/s its link should carry."""
    graph = panel("storpath-capacity.json", "Peak read throughput")
    series = query(fleet_prometheus, substitute(graph["targets"][0]["expr"]))
    ratios = {(r["metric"]["instance"], r["metric"]["device"]): float(r["value"][1]) for r in series}
    assert ratios[("am4-x2", "nvme1n1")] == pytest.approx(HISTORY_READ_RATE / 7.876923e9, rel=1e-3)
    # a Gen3 x4 drive behind its own root port (3.94 GB/s)
    assert ratios[("supermicro", "nvme0n1")] == pytest.approx(HISTORY_READ_RATE / 3.938462e9, rel=1e-3)
    top = table_rows(fleet_prometheus, panel("storpath-capacity.json", "Devices closest to their link"))
    assert len(top) == 20 and min(r["peak / link"] for r in top) >= ratios[("am4-x2", "nvme1n1")]


def test_capacity_shows_days_until_pools_fill(fleet_prometheus):
    """zpool2 grew linearly to 58 % over the month (from 80 % of today's allocation):
    (70 % - 58 %) / (0.2 * 58 % / 30 days) = 31 days to 70 %."""
    rows = table_rows(fleet_prometheus, panel("storpath-capacity.json", "Days until a pool crosses"))
    used = 1.8563535847424e13 / 3.2006096289792e13
    row = _one(rows, instance="intel", zpool="zpool2")
    assert row["days to 70%"] == pytest.approx((0.7 - used) / (0.2 * used / 30), rel=0.05)
    assert row["days to 90%"] == pytest.approx((0.9 - used) / (0.2 * used / 30), rel=0.05)


def test_fleet_shows_devices_per_host_against_the_model(fleet_prometheus):
    """Four hosts are the same ASUS X570 board with the same drives: each at the median."""
    rows = table_rows(fleet_prometheus, panel("storpath-fleet.json", "Inventory: devices per host"))
    am4 = [r for r in rows if r["instance"].startswith("am4-") and r["kind"] == "nvme_controller"]
    assert {r["instance"] for r in am4} == {"am4-x2", "am4-gen3", "am4-sata", "am4-hot"}
    # ASUS desktop firmware reports the placeholder product name "System Product Name" on the X570
    # and on the Z690 desktop alike: the board names the model, so the Z690 (2 NVMe controllers)
    # is a model of its own, not a fifth X570 below the median of 4.
    assert {(r["devices"], r["model median"], r["hosts of model"], r["vs model"], r["product_name"]) for r in am4} == {
        (4, 4, 4, 0, "ROG CROSSHAIR VIII HERO")}
    z690 = _one(rows, instance="z690-gpu", kind="nvme_controller")  # and its twin z690-capped
    assert (z690["product_name"], z690["devices"], z690["model median"], z690["hosts of model"], z690["vs model"]) == (
        "PRIME Z690-A", 2, 2, 2, 0)
    supermicro = _one(rows, instance="supermicro", kind="nvme_controller")
    assert supermicro["devices"] == 4
    below = panel("storpath-fleet.json", "Hosts with fewer devices than their model")
    # The shelf whose drive lost a path: one SAS disk (sd device) fewer than the same server with
    # both paths.
    assert float(query(fleet_prometheus, substitute(below["targets"][0]["expr"]))[0]["value"][1]) == 1
    assert {r["instance"] for r in rows if r["vs model"] == 1} == {"shelf-missing"}


def test_host_names_the_cause_of_a_capped_link(fleet_prometheus):
    """The Z690 whose M.2 port the kernel's bandwidth controller held at 8 GT/s: the Host board
    lists the drive's link (and the port's own) with the target and the cause; a host with no
    cap lists nothing. The board had no such panel before."""
    title = "Capped PCIe links"
    rows = table_rows(fleet_prometheus, panel("storpath-host.json", title), "z690-capped")
    drive = _one(rows, address="0000:02:00.0")
    assert drive["cause"] == "bandwidth_controller" and drive["capped"] == 1
    assert (drive["speed"], drive["target speed"], drive["both ends support"]) == (8, 8, 16)
    assert not table_rows(fleet_prometheus, panel("storpath-host.json", title), "z690-gpu")
