"""The emulated machines ("topologies"): QEMU arguments for the storage each one has."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Dict, List

# --------------------------------------------------------------------------------------
# Topologies: each a function that, given a directory for disk images, returns the QEMU
# arguments and kernel parameters of one emulated machine. The EXPECT_* tables describe
# what the kernel must see; tests assert against them.
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class Topology:
    name: str
    qemu_args: List[str]
    kernel_args: List[str] = dataclasses.field(default_factory=list)
    memory_mib: int = 1024
    cpus: int = 1
    description: str = ""


def _disk(diskdir: Path, name: str, size_mib: int) -> Path:
    p = diskdir / f"{name}.raw"
    with open(p, "wb") as f:
        f.truncate(size_mib * 1024 * 1024)
    return p


def _drive(diskdir: Path, drive_id: str, size_mib: int) -> List[str]:
    path = _disk(diskdir, drive_id, size_mib)
    return ["-drive", f"if=none,id={drive_id},format=raw,file={path},cache=unsafe"]


# NVMe controllers behind root ports of different capability. The emulated endpoint always
# trains at 2.5 GT/s x1, so every port shows a link below its own capability.
NVME_DRIVES = [
    # serial, port speed (GT/s, QEMU spelling), port width, NUMA node of the host bridge
    {"serial": "SPLAB0G4X4", "port_speed": "16", "port_width": 4, "numa_node": 0},
    {"serial": "SPLAB1G3X4", "port_speed": "8", "port_width": 4, "numa_node": 0},
    {"serial": "SPLAB2G3X2", "port_speed": "8", "port_width": 2, "numa_node": 0},
    {"serial": "SPLAB3NUMA1", "port_speed": "8", "port_width": 4, "numa_node": 1},
]
NVME_ENDPOINT_SPEED = "2.5 GT/s PCIe"
NVME_ENDPOINT_WIDTH = 1


def topology_nvme(diskdir: Path) -> Topology:
    half = 768
    args = [
        "-object", f"memory-backend-ram,id=mem0,size={half}M",
        "-object", f"memory-backend-ram,id=mem1,size={half}M",
        "-numa", "node,nodeid=0,cpus=0,memdev=mem0",
        "-numa", "node,nodeid=1,cpus=1,memdev=mem1",
        # A second PCIe host bridge whose devices belong to NUMA node 1.
        "-device", "pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0,addr=0x10",
    ]
    for i, d in enumerate(NVME_DRIVES):
        bus = "pxb1" if d["numa_node"] == 1 else "pcie.0"
        addr = ",addr=0x0" if d["numa_node"] == 1 else f",addr=0x{4 + i:x}"
        args += ["-device", f"pcie-root-port,id=rp{i},bus={bus},chassis={i + 1},slot={i + 1}"
                 f"{addr},x-speed={d['port_speed']},x-width={d['port_width']}"]
        args += _drive(diskdir, f"nvd{i}", 128)
        args += ["-device", f"nvme,id=nvme{i},serial={d['serial']},bus=rp{i}",
                 "-device", f"nvme-ns,drive=nvd{i},bus=nvme{i},nsid=1"]
    return Topology("nvme", args, memory_mib=2 * half, cpus=2,
                    description="4 NVMe behind 16GT/s x4, 8GT/s x4, 8GT/s x2 root ports, "
                                "one behind a pxb-pcie host bridge on NUMA node 1")


# SAS: an LSI SAS1068 HBA with two disks (8 phys, 2 attached). SATA: the q35 board's own
# AHCI controller with disks on ports 1 and 2 (ata1, ata2); the kernel is told to hold ata1
# at 3.0 Gbps and ata2 at 1.5 Gbps.
SAS_DISKS = [
    {"id": "sas0", "scsi_id": 0, "wwn": "0x5000c50015ea71a0", "serial": "SPLABSAS0"},
    {"id": "sas1", "scsi_id": 1, "wwn": "0x5000c50015ea71b0", "serial": "SPLABSAS1"},
]
SAS_PHYS = 8
SATA_DISKS = [
    {"id": "sata0", "bus": "ide.0", "serial": "SPLABSATA0", "link": "link1", "force": "3.0Gbps"},
    {"id": "sata1", "bus": "ide.1", "serial": "SPLABSATA1", "link": "link2", "force": "1.5Gbps"},
]


def topology_sas(diskdir: Path) -> Topology:
    args = ["-device", "pcie-root-port,id=rp0,bus=pcie.0,chassis=1,slot=1,addr=0x4,"
                       "x-speed=8,x-width=8",
            "-device", "mptsas1068,id=sas0,bus=rp0"]
    for d in SAS_DISKS:
        args += _drive(diskdir, d["id"], 64)
        args += ["-device", f"scsi-hd,drive={d['id']},bus=sas0.0,scsi-id={d['scsi_id']},"
                            f"wwn={d['wwn']},serial={d['serial']}"]
    for d in SATA_DISKS:
        args += _drive(diskdir, d["id"], 64)
        args += ["-device", f"ide-hd,drive={d['id']},bus={d['bus']},serial={d['serial']}"]
    force = ",".join(f"{i + 1}:{d['force']}" for i, d in enumerate(SATA_DISKS))
    return Topology("sas", args, kernel_args=[f"libata.force={force}"],
                    description="mptsas1068 with 2 SAS disks; AHCI with 2 SATA disks held "
                                "at 3.0 and 1.5 Gbps")


# md: small disks to build arrays from in the guest: virtio disks vda..vdg and two NVMe.
MD_VIRTIO_DISKS = 7
MD_NVME_SERIALS = ["SPLABMD0", "SPLABMD1"]


def _virtio_and_nvme(diskdir: Path, virtio: int, virtio_prefix: str, nvme_serials: List[str], nvme_prefix: str,
                     size_mib: int) -> List[str]:
    """`virtio` virtio disks (drives <virtio_prefix><i>, serial SPLAB<PREFIX><i>), then one NVMe per
    serial on its own Gen3 x4 root port (drives <nvme_prefix>nvd<i>, controllers <nvme_prefix>nvme<i>)."""
    args = []
    for i in range(virtio):
        args += _drive(diskdir, f"{virtio_prefix}{i}", size_mib)
        args += ["-device", f"virtio-blk-pci,drive={virtio_prefix}{i},serial=SPLAB{virtio_prefix.upper()}{i}"]
    for i, serial in enumerate(nvme_serials):
        args += ["-device", f"pcie-root-port,id=rp{i},bus=pcie.0,chassis={i + 1},"
                            f"slot={i + 1},x-speed=8,x-width=4"]
        args += _drive(diskdir, f"{nvme_prefix}nvd{i}", size_mib)
        args += ["-device", f"nvme,id={nvme_prefix}nvme{i},serial={serial},bus=rp{i}",
                 "-device", f"nvme-ns,drive={nvme_prefix}nvd{i},bus={nvme_prefix}nvme{i},nsid=1"]
    return args


def topology_md(diskdir: Path) -> Topology:
    args = _virtio_and_nvme(diskdir, MD_VIRTIO_DISKS, "vd", MD_NVME_SERIALS, "md", 64)
    return Topology("md", args, description="7 virtio disks and 2 NVMe for md arrays")


# zfs: pools built in the guest (needs the "zfs" image variant): 8 virtio disks for a
# raidz2 (vda-vdh), 4 for a raidz1 (vdi-vdl), 2 for cache (vdm, vdn), 1 spare disk (vdo) to
# replace with, and 2 NVMe for a mirrored log. 128 MiB each (ZFS needs 64 MiB a vdev).
ZFS_VIRTIO_DISKS = 15
ZFS_NVME_SERIALS = ["SPLABZIL0", "SPLABZIL1"]


def topology_zfs(diskdir: Path) -> Topology:
    args = _virtio_and_nvme(diskdir, ZFS_VIRTIO_DISKS, "zd", ZFS_NVME_SERIALS, "zil", 128)
    return Topology("zfs", args, memory_mib=2048, cpus=2,
                    description="15 virtio disks and 2 NVMe for ZFS pools (image variant zfs)")


# multipath: NVMe native multipath and dm-multipath on one machine.
# - One NVMe subsystem (QEMU's nvme-subsys) with two controllers, each behind its own root
#   port, sharing namespace 1 (nvme-ns shared=on attaches it to every controller of the
#   subsystem realized before it). The kernel's native multipath (nvme_core.multipath=Y,
#   Debian's CONFIG_NVME_MULTIPATH=y) makes one head namespace over the two paths.
# - One SCSI disk reached through two HBAs: two mptsas1068 controllers, each with a scsi-hd of
#   the same WWN and serial over the same image file (share-rw=on, file locking off), so the
#   guest sees two sd devices of one drive to build a dm-multipath map over.
# QEMU 7.2 prefixes the nvme-subsys nqn property with "nqn.2019-08.org.qemu:".
MULTIPATH_NQN_PROPERTY = "storpath-lab-multipath"
MULTIPATH_NQN = "nqn.2019-08.org.qemu:" + MULTIPATH_NQN_PROPERTY
# QEMU gives every controller of a subsystem the subsystem's serial (a different one is
# refused: "invalid controller serial"): the two paths are told apart by their root port.
MULTIPATH_NVME_SERIAL = "SPLABMPSUB"
MULTIPATH_NVME_PORTS = ["0000:00:04.0", "0000:00:05.0"]  # path A stays, path B is removed
MULTIPATH_SAS_WWN = "0x5000c50015ea7200"
MULTIPATH_SAS_SERIAL = "SPLABMPSAS"


def topology_multipath(diskdir: Path) -> Topology:
    args = ["-device", f"nvme-subsys,id=mpsubsys0,nqn={MULTIPATH_NQN_PROPERTY}"]
    for i, port in enumerate(MULTIPATH_NVME_PORTS):
        args += ["-device", f"pcie-root-port,id=rp{i},bus=pcie.0,chassis={i + 1},slot={i + 1},"
                            f"addr=0x{int(port.split(':')[2].split('.')[0], 16):x},x-speed=8,x-width=4",
                 "-device", f"nvme,id=mpnvme{i},serial={MULTIPATH_NVME_SERIAL},subsys=mpsubsys0,bus=rp{i}"]
    # The namespace comes after both controllers so that it is attached to both.
    args += _drive(diskdir, "mpnvd0", 64)
    args += ["-device", "nvme-ns,drive=mpnvd0,bus=mpnvme0,nsid=1,shared=on"]
    shared = _disk(diskdir, "mpsas", 64)
    for i in range(2):
        port = len(MULTIPATH_NVME_PORTS) + i
        args += ["-device", f"pcie-root-port,id=rp{port},bus=pcie.0,chassis={port + 1},slot={port + 1},"
                            f"addr=0x{4 + port:x},x-speed=8,x-width=8",
                 "-device", f"mptsas1068,id=mpsas{i},bus=rp{port}",
                 "-drive", f"if=none,id=mpsd{i},format=raw,file={shared},cache=unsafe,file.locking=off",
                 "-device", f"scsi-hd,drive=mpsd{i},bus=mpsas{i}.0,scsi-id=0,wwn={MULTIPATH_SAS_WWN},"
                            f"serial={MULTIPATH_SAS_SERIAL},share-rw=on"]
    return Topology("multipath", args, kernel_args=["nvme_core.multipath=Y"],
                    description="an NVMe subsystem of 2 controllers sharing a namespace; one SAS disk "
                                "through 2 HBAs (dm-multipath)")


TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {
    "nvme": topology_nvme,
    "sas": topology_sas,
    "md": topology_md,
    "multipath": topology_multipath,
}

# Topologies that boot an image variant other than the default one; kept out of
# TOPOLOGIES (whose machines all have a committed sysfs capture under captures/).
VARIANT_TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {"zfs": topology_zfs}
TOPOLOGY_VARIANTS: Dict[str, str] = {"zfs": "zfs"}
ALL_TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {**TOPOLOGIES, **VARIANT_TOPOLOGIES}
