"""The lab guests boot and the kernel sees the emulated hardware as designed.

These are assertions on kernel facts (sysfs spellings and values), independent of the
exporter: they pin down what storpath's readers will meet on a real kernel, and they
catch a QEMU or kernel change that would make the lab stop exercising a fault.
"""

import json
import re

import pytest

import lab

pytestmark = pytest.mark.lab

SPEED = {"2_5": "2.5 GT/s PCIe", "5": "5.0 GT/s PCIe", "8": "8.0 GT/s PCIe",
         "16": "16.0 GT/s PCIe", "32": "32.0 GT/s PCIe"}


def _pci_parent(guest, address):
    """PCI address of the port directly above ADDRESS."""
    real = guest.realpath(f"/sys/bus/pci/devices/{address}")
    parent = real.rsplit("/", 2)[-2]
    assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", parent), real
    return parent


# --------------------------------------------------------------------------- nvme

@pytest.fixture(scope="module")
def nvme_ctrls(nvme_guest):
    return lab.nvme_ctrl_by_serial(nvme_guest)


def test_nvme_guest_runs_the_debian_kernel(nvme_guest):
    release = nvme_guest.read("/proc/sys/kernel/osrelease")
    assert release == nvme_guest.image.kernel_release
    assert nvme_guest.read("/sys/devices/system/node/online") == "0-1"


def test_nvme_controllers_present_with_serials(nvme_ctrls):
    assert sorted(nvme_ctrls) == sorted(d["serial"] for d in lab.NVME_DRIVES)


@pytest.mark.parametrize("drive", lab.NVME_DRIVES, ids=lambda d: d["serial"])
def test_nvme_port_capability_and_trained_link(nvme_guest, nvme_ctrls, drive):
    ctrl = nvme_ctrls[drive["serial"]]
    address = nvme_guest.read(f"/sys/class/nvme/{ctrl}/address")
    port = _pci_parent(nvme_guest, address)
    attrs = nvme_guest.read_many(*(f"/sys/bus/pci/devices/{dev}/{a}"
                                   for dev in (port, address)
                                   for a in ("max_link_speed", "max_link_width",
                                             "current_link_speed", "current_link_width",
                                             "numa_node")))
    p = f"/sys/bus/pci/devices/{port}/"
    e = f"/sys/bus/pci/devices/{address}/"
    # The port advertises what QEMU was told ...
    assert attrs[p + "max_link_speed"] == SPEED[drive["port_speed"]]
    assert attrs[p + "max_link_width"] == str(drive["port_width"])
    # ... but the link trains to the endpoint's 2.5 GT/s x1, seen from both ends.
    for end in (p, e):
        assert attrs[end + "current_link_speed"] == lab.NVME_ENDPOINT_SPEED
        assert attrs[end + "current_link_width"] == str(lab.NVME_ENDPOINT_WIDTH)
    assert attrs[e + "max_link_speed"] == lab.NVME_ENDPOINT_SPEED
    assert attrs[e + "max_link_width"] == str(lab.NVME_ENDPOINT_WIDTH)
    # Devices behind the pxb-pcie bridge belong to node 1; the main host bridge has no
    # proximity domain, so its devices say -1 (as on many single-socket servers).
    expected_node = "1" if drive["numa_node"] == 1 else "-1"
    assert attrs[p + "numa_node"] == expected_node
    assert attrs[e + "numa_node"] == expected_node


def test_numa_nodes_have_one_cpu_each(nvme_guest):
    cpus = nvme_guest.read_many("/sys/devices/system/node/node0/cpulist",
                                "/sys/devices/system/node/node1/cpulist",
                                "/sys/devices/system/cpu/cpu1/topology/physical_package_id")
    assert cpus["/sys/devices/system/node/node0/cpulist"] == "0"
    assert cpus["/sys/devices/system/node/node1/cpulist"] == "1"
    assert cpus["/sys/devices/system/cpu/cpu1/topology/physical_package_id"] == "1"


def test_nvme_pxb_host_bridge_is_its_own_pci_domain_root(nvme_guest):
    assert nvme_guest.sh("ls -d /sys/devices/pci0000:80").strip() == "/sys/devices/pci0000:80"


def test_nvme_namespaces_offer_eight_formats_and_use_512(nvme_guest, nvme_ctrls):
    ctrl = nvme_ctrls["SPLAB0G4X4"]
    ns = f"{ctrl}n1"
    assert nvme_guest.read(f"/sys/block/{ns}/queue/logical_block_size") == "512"
    out = nvme_guest.sh(f"nvme id-ns /dev/{ns} --output-format=json")
    idns = json.loads(out)
    assert idns["nlbaf"] == 7
    lbads = [f["ds"] for f in idns["lbafs"]]
    assert lbads == [9, 9, 9, 9, 12, 12, 12, 12]
    assert idns["flbas"] & 0xF == 0


def test_nvme_block_device_hangs_below_its_pci_controller(nvme_guest, nvme_ctrls):
    """Debian enables NVMe native multipath, but a controller without multi-path
    capability (QEMU's, most single-port drives) gets no shared namespace head: nvmeXnY
    lives below the PCI function, at .../nvme/nvmeX/nvmeXnY."""
    ctrl = nvme_ctrls["SPLAB0G4X4"]
    assert nvme_guest.read("/sys/module/nvme_core/parameters/multipath") == "Y"
    address = nvme_guest.read(f"/sys/class/nvme/{ctrl}/address")
    real = nvme_guest.realpath(f"/sys/block/{ctrl}n1")
    assert real.endswith(f"/{address}/nvme/{ctrl}/{ctrl}n1"), real


def test_nvme_format_to_4k_is_seen_by_sysfs(nvme_guest, nvme_ctrls):
    ns = nvme_ctrls["SPLAB1G3X4"] + "n1"
    nvme_guest.sh(f"nvme format /dev/{ns} --lbaf=4 --force", timeout=300)
    nvme_guest.run("sleep 1")
    assert nvme_guest.read(f"/sys/block/{ns}/queue/logical_block_size") == "4096"
    idns = json.loads(nvme_guest.sh(f"nvme id-ns /dev/{ns} --output-format=json"))
    assert idns["flbas"] & 0xF == 4
    # The other namespaces are untouched.
    other = nvme_ctrls["SPLAB0G4X4"] + "n1"
    assert nvme_guest.read(f"/sys/block/{other}/queue/logical_block_size") == "512"


# --------------------------------------------------------------------------- sas / sata

def test_sas_phys_of_the_hba(sas_guest):
    phys = sas_guest.read_many("/sys/class/sas_phy/*/negotiated_linkrate")
    assert len(phys) == lab.SAS_PHYS
    rates = sorted(phys.values())
    assert rates.count("3.0 Gbit") == len(lab.SAS_DISKS)
    assert rates.count("Link Rate failed") == lab.SAS_PHYS - len(lab.SAS_DISKS)


def test_sas_phy_rate_spellings(sas_guest):
    attrs = sas_guest.read_many("/sys/class/sas_phy/*/minimum_linkrate",
                                "/sys/class/sas_phy/*/maximum_linkrate",
                                "/sys/class/sas_phy/*/minimum_linkrate_hw",
                                "/sys/class/sas_phy/*/maximum_linkrate_hw")
    for path, value in attrs.items():
        expected = "1.5 Gbit" if "/minimum" in path else "3.0 Gbit"
        assert value == expected, path


def test_sas_end_devices_carry_the_disk_wwns(sas_guest):
    addrs = sas_guest.read_many("/sys/class/sas_device/*/sas_address")
    assert sorted(addrs.values()) == sorted(d["wwn"] for d in lab.SAS_DISKS)
    ends = sas_guest.sh("ls /sys/class/sas_end_device").split()
    assert len(ends) == len(lab.SAS_DISKS)


def test_sas_disks_are_block_devices_below_end_devices(sas_guest):
    out = sas_guest.sh("for b in /sys/block/sd*; do readlink -f $b; done")
    below = [line for line in out.splitlines() if "/end_device-" in line]
    assert len(below) == len(lab.SAS_DISKS)


def test_sata_links_held_below_the_limit(sas_guest):
    a = sas_guest.read_many("/sys/class/ata_link/*/sata_spd",
                            "/sys/class/ata_link/*/sata_spd_limit",
                            "/sys/class/ata_link/*/hw_sata_spd_limit")
    base = "/sys/class/ata_link/"
    # link1: libata.force=1:3.0Gbps: limit and hw limit read 3.0, the link trained 1.5.
    assert a[base + "link1/sata_spd"] == "1.5 Gbps"
    assert a[base + "link1/sata_spd_limit"] == "3.0 Gbps"
    assert a[base + "link1/hw_sata_spd_limit"] == "3.0 Gbps"
    # link2: forced to 1.5 Gbps, trained 1.5: at its limit.
    for attr in ("sata_spd", "sata_spd_limit", "hw_sata_spd_limit"):
        assert a[base + f"link2/{attr}"] == "1.5 Gbps"
    # The empty ports of the 6-port AHCI controller.
    for n in range(3, 7):
        for attr in ("sata_spd", "sata_spd_limit", "hw_sata_spd_limit"):
            assert a[base + f"link{n}/{attr}"] == "<unknown>"


# --------------------------------------------------------------------------- md

def test_md_raid1_fail_and_recover(md_guest):
    g = md_guest
    g.sh("mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 "
         "--assume-clean /dev/vda /dev/vdb")
    a = g.read_many("/sys/block/md0/md/level", "/sys/block/md0/md/raid_disks",
                    "/sys/block/md0/md/degraded", "/sys/block/md0/md/array_state",
                    "/sys/block/md0/md/sync_action", "/sys/block/md0/md/dev-vdb/state")
    assert a["/sys/block/md0/md/level"] == "raid1"
    assert a["/sys/block/md0/md/raid_disks"] == "2"
    assert a["/sys/block/md0/md/degraded"] == "0"
    assert a["/sys/block/md0/md/array_state"] in ("clean", "active")
    assert a["/sys/block/md0/md/sync_action"] == "idle"
    assert a["/sys/block/md0/md/dev-vdb/state"] == "in_sync"
    assert re.search(r"md0 : active raid1 vdb\[1\] vda\[0\]", g.read("/proc/mdstat"))

    g.sh("mdadm /dev/md0 --fail /dev/vdb")
    a = g.read_many("/sys/block/md0/md/degraded", "/sys/block/md0/md/dev-vdb/state")
    assert a["/sys/block/md0/md/degraded"] == "1"
    assert "faulty" in a["/sys/block/md0/md/dev-vdb/state"].split(",")
    assert "[2/1] [U_]" in g.read("/proc/mdstat")

    g.sh("mdadm /dev/md0 --remove /dev/vdb && mdadm /dev/md0 --add /dev/vdb")
    g.sh("mdadm --wait /dev/md0 || true", timeout=300)
    a = g.read_many("/sys/block/md0/md/degraded", "/sys/block/md0/md/dev-vdb/state")
    assert a["/sys/block/md0/md/degraded"] == "0"
    assert a["/sys/block/md0/md/dev-vdb/state"] == "in_sync"


def test_md_raid0_has_no_redundancy_attributes(md_guest):
    g = md_guest
    g.sh("mdadm --create /dev/md1 --run --level=0 --raid-devices=2 --metadata=1.2 "
         "/dev/vdc /dev/vdd")
    a = g.read_many("/sys/block/md1/md/level", "/sys/block/md1/md/degraded",
                    "/sys/block/md1/md/sync_action", "/sys/block/md1/md/chunk_size")
    assert a["/sys/block/md1/md/level"] == "raid0"
    assert a["/sys/block/md1/md/degraded"] is None
    assert a["/sys/block/md1/md/sync_action"] is None
    assert a["/sys/block/md1/md/chunk_size"] == "524288"


def test_md_raid5_initial_build_is_a_recovery(md_guest):
    """mdadm builds a new raid5 degraded and recovers onto the last member."""
    g = md_guest
    g.sh("echo 1 > /proc/sys/dev/raid/speed_limit_min")
    g.sh("mdadm --create /dev/md3 --run --level=5 --raid-devices=3 --metadata=1.2 "
         "/dev/vde /dev/vdf /dev/vdg && echo 64 > /sys/block/md3/md/sync_speed_max")
    a = g.read_many("/sys/block/md3/md/level", "/sys/block/md3/md/sync_action",
                    "/sys/block/md3/md/sync_completed", "/sys/block/md3/md/degraded",
                    "/sys/block/md3/md/dev-vdg/state")
    assert a["/sys/block/md3/md/level"] == "raid5"
    assert a["/sys/block/md3/md/sync_action"] == "recover"
    assert a["/sys/block/md3/md/degraded"] == "1"
    assert a["/sys/block/md3/md/dev-vdg/state"] == "spare"
    assert re.fullmatch(r"\d+ / \d+", a["/sys/block/md3/md/sync_completed"])
    assert re.search(r"recovery\s*=\s*[0-9.]+%", g.read("/proc/mdstat"))


def test_md_raid1_without_assume_clean_resyncs(md_guest):
    g = md_guest
    ctrls = lab.nvme_ctrl_by_serial(g)
    members = " ".join(f"/dev/{ctrls[s]}n1" for s in lab.MD_NVME_SERIALS)
    g.sh("echo 1 > /proc/sys/dev/raid/speed_limit_min")
    g.sh(f"mdadm --create /dev/md4 --run --level=1 --raid-devices=2 --metadata=1.2 "
         f"{members} && echo 64 > /sys/block/md4/md/sync_speed_max")
    a = g.read_many("/sys/block/md4/md/sync_action", "/sys/block/md4/md/degraded")
    assert a["/sys/block/md4/md/sync_action"] == "resync"
    assert a["/sys/block/md4/md/degraded"] == "0"
    assert re.search(r"resync\s*=\s*[0-9.]+%", g.read("/proc/mdstat"))
