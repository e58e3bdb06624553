"""The exporter against a real kernel: run `storpath serve` inside the lab guests, scrape
/metrics there, and check the values against the emulated hardware; then inject faults
(reformat a namespace, fail an md member) and see the metrics follow.

Only metric names the exporter serves today are asserted (see docs/metrics.md).
"""

import re

import pytest

import lab

pytestmark = pytest.mark.lab

GTS = {"2_5": 2.5e9, "5": 5e9, "8": 8e9, "16": 1.6e10, "32": 3.2e10}


def scrape(guest):
    return lab.Scrape(lab.exporter_metrics(guest))


def assert_collectors_ok(s):
    results = s.series("storpath_scrape_collector_success")
    assert results, "no storpath_scrape_collector_success series"
    failed = [lab_["collector"] for lab_, v in results if v != 1]
    assert not failed, f"collectors failed: {failed}"


# --------------------------------------------------------------------------- nvme

@pytest.fixture(scope="module")
def nvme_scrape(nvme_guest):
    """A scrape taken once the background NVMe Identify has run for every controller."""
    return lab.scrape_until(
        nvme_guest,
        lambda s: len([v for _, v in s.series("storpath_nvme_identify_available")
                       if v == 1]) == len(lab.NVME_DRIVES),
        what="NVMe Identify of every controller")


@pytest.fixture(scope="module")
def nvme_addresses(nvme_scrape):
    """serial -> (controller, endpoint address, port address), from the exporter's info."""
    res = {}
    for labels in nvme_scrape.label_sets("storpath_nvme_controller_info"):
        address = labels["address"]
        info = nvme_scrape.label_sets("storpath_pcie_device_info", address=address)
        assert len(info) == 1, address
        res[labels["serial"].strip()] = (labels["controller"], address, info[0]["upstream"])
    return res


def test_nvme_guest_collectors_succeed(nvme_scrape):
    assert_collectors_ok(nvme_scrape)


def test_nvme_controllers_are_reported_with_their_pci_function(nvme_scrape, nvme_addresses):
    assert sorted(nvme_addresses) == sorted(d["serial"] for d in lab.NVME_DRIVES)
    for serial, (ctrl, address, port) in nvme_addresses.items():
        info = nvme_scrape.label_sets("storpath_pcie_device_info", address=address)[0]
        assert info["driver"] == "nvme"
        assert info["port_type"] == "endpoint"
        assert info["root_port"] == port
        assert nvme_scrape.value("storpath_block_device_info", device=f"{ctrl}n1",
                                 controller=ctrl, address=address) == 1


@pytest.mark.parametrize("drive", lab.NVME_DRIVES, ids=lambda d: d["serial"])
def test_nvme_link_metrics(nvme_scrape, nvme_addresses, drive):
    s = nvme_scrape
    _, endpoint, port = nvme_addresses[drive["serial"]]
    port_info = s.label_sets("storpath_pcie_device_info", address=port)[0]
    assert port_info["port_type"] == "root_port"
    # The port's capability as given to QEMU.
    assert s.value("storpath_pcie_max_link_speed_transfers_per_second",
                   address=port) == GTS[drive["port_speed"]]
    assert s.value("storpath_pcie_max_link_width", address=port) == drive["port_width"]
    # The endpoint's capability and the trained link: 2.5 GT/s x1 at both ends.
    assert s.value("storpath_pcie_max_link_speed_transfers_per_second",
                   address=endpoint) == 2.5e9
    assert s.value("storpath_pcie_max_link_width", address=endpoint) == 1
    for end in (port, endpoint):
        assert s.value("storpath_pcie_current_link_speed_transfers_per_second",
                       address=end) == 2.5e9
        assert s.value("storpath_pcie_current_link_width", address=end) == 1
        # Expected = the lower capability of the two ends: the device's, so no fault.
        assert s.value("storpath_pcie_expected_link_speed_transfers_per_second",
                       address=end) == 2.5e9
        assert s.value("storpath_pcie_expected_link_width", address=end) == 1
        # 2.5 GT/s x1 with 8b/10b: 250 MB/s per direction.
        assert s.value("storpath_pcie_current_link_bandwidth_bytes_per_second",
                       address=end) == 2.5e8
        assert s.value("storpath_pcie_expected_link_bandwidth_bytes_per_second",
                       address=end) == 2.5e8
    # In a guest (the lab is QEMU) QEMU's own NVMe and its ports are not hardware: the link is
    # reported but not judged (storpath.analysis.virtual), and no hop of it is a bottleneck.
    assert s.value("storpath_host_info", virtualization="vm") == 1
    assert s.value("storpath_pcie_link_verifiable", address=endpoint, basis="none",
                   reason="emulated_device") == 0
    assert not s.label_sets("storpath_pcie_path_bottleneck_bandwidth_bytes_per_second", address=endpoint)


def test_nvme_numa_placement(nvme_scrape, nvme_addresses):
    s = nvme_scrape
    assert len(s.series("storpath_numa_node_info")) == 2
    assert s.value("storpath_numa_node_info", numa_node="0", cpulist="0") == 1
    assert s.value("storpath_numa_node_info", numa_node="1", cpulist="1") == 1
    assert s.value("storpath_numa_nodes_per_socket") == 1
    for d in lab.NVME_DRIVES:
        ctrl, endpoint, _ = nvme_addresses[d["serial"]]
        expected = 1 if d["numa_node"] == 1 else -1
        assert s.value("storpath_numa_storage_controller_node", address=endpoint) == expected
        assert s.value("storpath_block_device_numa_node", device=f"{ctrl}n1") == expected


def test_nvme_lba_formats_before_reformat(nvme_scrape, nvme_addresses):
    s = nvme_scrape
    for d in lab.NVME_DRIVES:
        ctrl = nvme_addresses[d["serial"]][0]
        dev = f"{ctrl}n1"
        assert s.value("storpath_nvme_namespace_info", device=dev, controller=ctrl,
                       nsid="1") == 1
        assert s.value("storpath_nvme_namespace_lba_size_bytes", device=dev) == 512
        # QEMU rates every format "best" (RP 0); the larger data size wins the tie.
        assert s.value("storpath_nvme_namespace_best_lba_size_bytes", device=dev) == 4096
        formats = s.label_sets("storpath_nvme_namespace_lba_format_info", device=dev)
        assert sorted((f["index"], f["data_size_bytes"], f["metadata_size_bytes"])
                      for f in formats) == [
            ("0", "512", "0"), ("1", "512", "8"), ("2", "512", "16"), ("3", "512", "64"),
            ("4", "4096", "0"), ("5", "4096", "8"), ("6", "4096", "16"), ("7", "4096", "64")]
        assert [f["index"] for f in formats if f["in_use"] == "true"] == ["0"]
        assert s.value("storpath_nvme_identify_available", controller=ctrl) == 1


def test_nvme_reformat_to_4k_is_followed(nvme_guest, nvme_scrape, nvme_addresses):
    ctrl = nvme_addresses["SPLAB2G3X2"][0]
    dev = f"{ctrl}n1"
    before = nvme_scrape.value("storpath_nvme_identify_timestamp_seconds", controller=ctrl)
    nvme_guest.sh(f"nvme format /dev/{dev} --lbaf=4 --force", timeout=300)

    def followed(s):
        in_use = [f["index"] for f in s.label_sets("storpath_nvme_namespace_lba_format_info",
                                                     device=dev) if f["in_use"] == "true"]
        return (s.value("storpath_nvme_namespace_lba_size_bytes", device=dev) == 4096
                and in_use == ["4"])

    s = lab.scrape_until(nvme_guest, followed, what=f"{dev} reformatted to 4 KiB in the metrics")
    assert s.value("storpath_nvme_namespace_best_lba_size_bytes", device=dev) == 4096
    assert s.value("storpath_nvme_identify_timestamp_seconds", controller=ctrl) > before
    # The other namespaces stay at 512 B, still below their best format.
    other = nvme_addresses["SPLAB0G4X4"][0] + "n1"
    assert s.value("storpath_nvme_namespace_lba_size_bytes", device=other) == 512
    assert s.value("storpath_nvme_namespace_best_lba_size_bytes", device=other) == 4096
    assert_collectors_ok(s)


def test_nvme_unbind_hot_removal_and_rescan_are_followed(nvme_guest, nvme_scrape, nvme_addresses):
    """The exporter keeps per-device records and holds device directories open between
    scrapes: a real kernel's driver unbind, hot removal and rescan must show on the next
    scrapes, and the device that comes back is read as the new instance it is."""
    ctrl, address, port = nvme_addresses["SPLAB3NUMA1"]
    speed = nvme_scrape.value("storpath_pcie_current_link_speed_transfers_per_second", address=address)
    assert speed is not None

    def driver(s):
        info = s.label_sets("storpath_pcie_device_info", address=address)
        return info[0]["driver"] if info else None

    nvme_guest.sh(f"echo {address} > /sys/bus/pci/drivers/nvme/unbind")
    s = lab.scrape_until(nvme_guest, lambda s: driver(s) == "", what=f"{address} without a driver")
    assert s.value("storpath_nvme_controller_info", controller=ctrl) is None
    assert s.value("storpath_pcie_current_link_speed_transfers_per_second", address=address) == speed
    assert_collectors_ok(s)

    # What the exporter's per-instance records rest on: the kernel gives the bus symlink of
    # a device that comes back a new inode.
    inode_before = nvme_guest.sh(f"stat -c %i /sys/bus/pci/devices/{address}").strip()
    nvme_guest.sh(f"echo 1 > /sys/bus/pci/devices/{address}/remove")
    s = lab.scrape_until(nvme_guest, lambda s: driver(s) is None, what=f"{address} removed")
    assert s.value("storpath_pcie_current_link_speed_transfers_per_second", address=address) is None
    # The port stays, its link now down.
    assert s.value("storpath_pcie_current_link_width", address=port) is not None
    assert_collectors_ok(s)

    nvme_guest.sh("echo 1 > /sys/bus/pci/rescan")
    s = lab.scrape_until(
        nvme_guest, lambda s: driver(s) == "nvme" and any(
            labels["address"] == address for labels in s.label_sets("storpath_nvme_controller_info"))
        and any(v == 1 for _, v in s.series("storpath_nvme_identify_available")),
        what=f"{address} back after a rescan")
    assert s.value("storpath_pcie_current_link_speed_transfers_per_second", address=address) == speed
    assert nvme_guest.sh(f"stat -c %i /sys/bus/pci/devices/{address}").strip() != inode_before
    back = [labels["controller"] for labels in s.label_sets("storpath_nvme_controller_info")
            if labels["address"] == address]
    assert len(back) == 1
    # With native multipath the disk is named after the subsystem, which a rescan may number anew.
    disks = [labels["device"] for labels in s.label_sets("storpath_block_device_info", address=address)]
    assert len(disks) == 1
    s = lab.scrape_until(nvme_guest, lambda s: s.value("storpath_nvme_identify_available", controller=back[0]) == 1,
                     what=f"Identify of the namespace of {back[0]} after the rescan")
    assert s.value("storpath_nvme_namespace_lba_size_bytes", device=disks[0]) == 512
    assert s.value("storpath_nvme_namespace_best_lba_size_bytes", device=disks[0]) == 4096
    assert_collectors_ok(s)


# --------------------------------------------------------------------------- sas / sata

@pytest.fixture(scope="module")
def sas_scrape(sas_guest):
    return scrape(sas_guest)


@pytest.fixture(scope="module")
def sas_phys(sas_guest):
    """phy name -> sas address of the attached disk (None for an empty phy)."""
    out = sas_guest.sh("cd /sys/class/sas_phy && for p in *; do "
                       "echo \"$p $(cat $p/negotiated_linkrate | tr ' ' _)\"; done")
    res = {}
    for line in out.splitlines():
        phy, rate = line.split()
        res[phy] = rate
    return res


def test_sas_guest_collectors_succeed(sas_scrape):
    assert_collectors_ok(sas_scrape)


def test_sas_phy_rates(sas_scrape, sas_phys):
    s = sas_scrape
    assert len(sas_phys) == lab.SAS_PHYS
    for phy, rate in sas_phys.items():
        assert s.value("storpath_sas_phy_hardware_minimum_link_rate_transfers_per_second",
                       phy=phy) == 1.5e9
        assert s.value("storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second",
                       phy=phy) == 3e9
        assert s.value("storpath_sas_phy_minimum_link_rate_transfers_per_second",
                       phy=phy) == 1.5e9
        assert s.value("storpath_sas_phy_maximum_link_rate_transfers_per_second",
                       phy=phy) == 3e9
        if rate == "3.0_Gbit":
            assert s.value("storpath_sas_phy_negotiated_link_rate_transfers_per_second",
                           phy=phy) == 3e9
            assert s.value("storpath_sas_phy_link_up", phy=phy) == 1
            assert s.value("storpath_sas_phy_attached", phy=phy) == 1
        else:
            # "Link Rate failed": no rate, and an empty bay rather than a slow link.
            assert rate == "Link_Rate_failed"
            assert s.value("storpath_sas_phy_negotiated_link_rate_transfers_per_second",
                           phy=phy) is None
            assert s.value("storpath_sas_phy_link_up", phy=phy) == 0
            assert s.value("storpath_sas_phy_attached", phy=phy) == 0
        assert s.value("storpath_sas_phy_enabled", phy=phy) == 1


def test_sas_phy_info_joins_disks(sas_guest, sas_scrape):
    infos = [i for i in sas_scrape.label_sets("storpath_sas_phy_info")
             if i.get("attached_sas_address")
             and i["attached_sas_address"] != "0x0000000000000000"]
    assert sorted(i["attached_sas_address"] for i in infos) == \
        sorted(d["wwn"] for d in lab.SAS_DISKS)
    for i in infos:
        assert i["attached_protocols"] == "ssp"
        assert re.fullmatch(r"sd[a-z]+", i["device"]), i
        real = sas_guest.realpath(f"/sys/block/{i['device']}")
        assert f"/{i['attached_device']}/" in real


@pytest.fixture(scope="module")
def sata_disks(sas_guest):
    """ata port number -> block device, read from the guest."""
    out = sas_guest.sh("for b in /sys/block/sd*; do echo \"$(basename $b) "
                       "$(readlink -f $b)\"; done")
    res = {}
    for line in out.splitlines():
        dev, real = line.split()
        m = re.search(r"/ata(\d+)/", real)
        if m:
            res[int(m.group(1))] = dev
    return res


def _sata_series(s, name, device):
    found = s.series(name, device=device)
    assert len(found) <= 1, found
    return found[0][1] if found else None


def test_sata_link_forced_to_3g_trains_at_1_5g(sas_scrape, sata_disks):
    s, dev = sas_scrape, sata_disks[1]
    assert _sata_series(s, "storpath_sata_link_speed_transfers_per_second", dev) == 1.5e9
    assert _sata_series(s, "storpath_sata_link_limit_transfers_per_second", dev) == 3e9
    assert _sata_series(s, "storpath_sata_link_hardware_limit_transfers_per_second",
                        dev) == 3e9
    # libata.force lowers the limit and the hardware limit alike: not "limited".
    assert _sata_series(s, "storpath_sata_link_limited", dev) == 0


def test_sata_link_forced_to_1_5g(sas_scrape, sata_disks):
    s, dev = sas_scrape, sata_disks[2]
    for name in ("storpath_sata_link_speed_transfers_per_second",
                 "storpath_sata_link_limit_transfers_per_second",
                 "storpath_sata_link_hardware_limit_transfers_per_second"):
        assert _sata_series(s, name, dev) == 1.5e9, name
    assert _sata_series(s, "storpath_sata_link_limited", dev) == 0


def test_sata_empty_ports_have_no_speed(sas_scrape, sata_disks):
    speeds = sas_scrape.series("storpath_sata_link_speed_transfers_per_second")
    assert len(speeds) == len(lab.SATA_DISKS)


# --------------------------------------------------------------------------- md

def _md(s, name, array, **labels):
    return s.value(name, device=array, **labels)


@pytest.fixture(scope="module")
def md_arrays(md_guest):
    """md0 raid1 (virtio), md1 raid0 (virtio), md3 raid5 recovering (virtio)."""
    g = md_guest
    g.sh("echo 1 > /proc/sys/dev/raid/speed_limit_min")
    g.sh("mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 "
         "--assume-clean /dev/vda /dev/vdb")
    g.sh("mdadm --create /dev/md1 --run --level=0 --raid-devices=2 --metadata=1.2 "
         "/dev/vdc /dev/vdd")
    g.sh("mdadm --create /dev/md3 --run --level=5 --raid-devices=3 --metadata=1.2 "
         "/dev/vde /dev/vdf /dev/vdg && echo 64 > /sys/block/md3/md/sync_speed_max")
    return g


def test_md_healthy_arrays(md_arrays):
    s = scrape(md_arrays)
    assert_collectors_ok(s)
    assert _md(s, "storpath_md_level_info", "md0", level="raid1") == 1
    assert _md(s, "storpath_md_raid_disks", "md0") == 2
    assert _md(s, "storpath_md_degraded_disks", "md0") == 0
    assert _md(s, "storpath_md_sync_action", "md0", action="idle") == 1
    states = {lab_["state"]: v for lab_, v in
              s.series("storpath_md_array_state", device="md0")}
    assert sum(states.values()) == 1
    assert states.get("clean") == 1 or states.get("active") == 1
    members = s.label_sets("storpath_md_member_info", device="md0")
    assert sorted((m["member"], m["state"]) for m in members) == [
        ("vda", "in_sync"), ("vdb", "in_sync")]
    # raid0 has no redundancy: no degraded/sync series, but a chunk size.
    assert _md(s, "storpath_md_level_info", "md1", level="raid0") == 1
    assert _md(s, "storpath_md_degraded_disks", "md1") is None
    assert not s.series("storpath_md_sync_action", device="md1")
    assert _md(s, "storpath_md_chunk_size_bytes", "md1") == 524288
    # raid5 just created: degraded by one, recovering onto the last member.
    assert _md(s, "storpath_md_level_info", "md3", level="raid5") == 1
    assert _md(s, "storpath_md_sync_action", "md3", action="recover") == 1
    assert _md(s, "storpath_md_degraded_disks", "md3") == 1
    ratio = _md(s, "storpath_md_sync_completed_ratio", "md3")
    assert ratio is not None and 0 <= ratio < 1


def test_md_failed_member_is_reported(md_arrays):
    g = md_arrays
    g.sh("mdadm /dev/md0 --fail /dev/vdb")
    s = scrape(g)
    assert _md(s, "storpath_md_degraded_disks", "md0") == 1
    members = {m["member"]: m for m in s.label_sets("storpath_md_member_info", device="md0")}
    assert "faulty" in members["vdb"]["state"].split(",")
    assert members["vda"]["state"] == "in_sync"
    # Remove and re-add: the array rebuilds and becomes whole again.
    g.sh("mdadm /dev/md0 --remove /dev/vdb && mdadm /dev/md0 --add /dev/vdb")
    g.sh("mdadm --wait /dev/md0 || true", timeout=300)
    s = scrape(g)
    assert _md(s, "storpath_md_degraded_disks", "md0") == 0
    assert _md(s, "storpath_md_sync_action", "md0", action="idle") == 1
    members = {m["member"]: m for m in s.label_sets("storpath_md_member_info", device="md0")}
    assert members["vdb"]["state"] == "in_sync"
