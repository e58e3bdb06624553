"""A tiny generated sysfs tree for the integration tests, until the fixture machines of tests/fixtures exist.

One PCIe root port (0000:00:01.1) and, below it, one NVMe drive (0000:01:00.0). Both ends support
16 GT/s x4, but the link trained at 8 GT/s: the "link trained below what both ends support" fault.

Layout follows the kernel: attributes under /sys/devices/pci0000:00/..., relative symlinks from
/sys/bus/pci/devices/ADDRESS, /sys/class/nvme/nvme0, /sys/class/block/nvme0n1 and /sys/block/nvme0n1.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_PORT = "0000:00:01.1"
NVME = "0000:01:00.0"


def _config_space(vendor: int, device: int, class_code: int, port_type: int) -> bytes:
    """256 bytes of config space with a PCI Express capability of the given Device/Port Type."""
    c = bytearray(256)
    c[0:2] = vendor.to_bytes(2, "little")
    c[2:4] = device.to_bytes(2, "little")
    c[0x06] = 0x10  # status: capability list present
    c[0x09:0x0C] = class_code.to_bytes(3, "little")
    c[0x0E] = 0x01 if (class_code >> 8) == 0x0604 else 0x00  # header type
    c[0x34] = 0x40  # capabilities pointer
    c[0x40] = 0x10  # PCI Express capability
    c[0x41] = 0x00  # last capability
    c[0x42] = (port_type << 4) | 0x2  # capability version 2
    return bytes(c)


def _write(directory: Path, attrs: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in attrs.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, bytes):
            path.write_bytes(value)
        else:
            path.write_text(f"{value}\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def make_nvme_pcie_tree(root: Path, current_speed: str = "8.0 GT/s PCIe") -> Path:
    """Create the tree under ``root`` (the directory that stands for /sys) and return ``root``."""
    host = root / "devices" / "pci0000:00"
    port = host / ROOT_PORT
    nvme = port / NVME
    _write(host, {"uevent": ""})
    _write(port, {
        "class": "0x060400", "vendor": "0x1022", "device": "0x1483",
        "subsystem_vendor": "0x1022", "subsystem_device": "0x1453", "numa_node": "0",
        "current_link_speed": current_speed, "max_link_speed": "16.0 GT/s PCIe",
        "current_link_width": "4", "max_link_width": "4",
        "config": _config_space(0x1022, 0x1483, 0x060400, 0x4),
    })
    _write(nvme, {
        "class": "0x010802", "vendor": "0x1bb1", "device": "0x5018",
        "subsystem_vendor": "0x1bb1", "subsystem_device": "0x5018", "numa_node": "0",
        "current_link_speed": current_speed, "max_link_speed": "16.0 GT/s PCIe",
        "current_link_width": "4", "max_link_width": "4",
        "config": _config_space(0x1BB1, 0x5018, 0x010802, 0x0),
    })
    ctrl = nvme / "nvme" / "nvme0"
    _write(ctrl, {"model": "Seagate FireCuda 530 ZP1000GM30013", "serial": "7VS00000",
                  "firmware_rev": "SU6SM003", "transport": "pcie", "address": NVME, "dev": "259:0"})
    ns = ctrl / "nvme0n1"
    _write(ns, {"size": "1953525168", "dev": "259:1", "removable": "0", "ro": "0",
                "queue/logical_block_size": "512", "queue/physical_block_size": "512",
                "queue/hw_sector_size": "512", "queue/rotational": "0", "queue/scheduler": "[none] mq-deadline"})
    _link(ctrl / "device", nvme)
    _link(ns / "device", ctrl)
    for address, path in ((ROOT_PORT, port), (NVME, nvme)):
        _link(root / "bus" / "pci" / "devices" / address, path)
    _link(root / "class" / "nvme" / "nvme0", ctrl)
    _link(root / "class" / "block" / "nvme0n1", ns)
    _link(root / "block" / "nvme0n1", ns)
    return root
