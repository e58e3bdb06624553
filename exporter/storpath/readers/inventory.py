"""The storage devices of a host and their identity, for counting them.

The devices themselves come from what the snapshot read already (the PCI
tree and /sys/class/block, storpath.scrape.snapshot): this module only sorts
them into kinds and reads what identifies each one, once per device instance.

- PCI functions of class 01 (mass storage): 0108xx is an NVMe controller, the others
  (SCSI 0100, IDE 0101, RAID 0104, SATA 0106, SAS 0107) are host bus adapters. Their
  `vendor`/`device` IDs are the model (`1000:0097`, as `lspci -n` prints them). An NVMe
  controller's model and serial are in its `nvme/nvmeX/{model,serial}` below the PCI
  function (Documentation/ABI/testing/sysfs-class-nvme), space-padded.
- Block devices: nvmeXnY is an NVMe namespace (with the controller's model and serial);
  sdX is a SATA disk below a libata port (`ataN` in its path) or a SAS disk below a SAS
  end device (`end_device-H:N`: a SATA drive on a SAS HBA counts here, as the SAS layer
  sees it). Other sd devices (USB, iSCSI, virtio-scsi) are not counted. A SCSI disk's
  model is `device/vendor` + `device/model`; its serial is the Unit Serial Number VPD
  page (`device/vpd_pg80`, SPC-4 7.8.15: 4-byte header, then the serial), when present.
- Physical slots: /sys/bus/pci/slots/<name>/address holds `domain:bus:device` of what
  sits in the slot (Documentation/ABI/testing/sysfs-bus-pci, from ACPI _SUN or a
  hotplug driver); every function of that device is in the slot.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Dict, Iterable, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_identity
from storpath.readers.block import BlockDevice
from storpath.readers.pci import PciDevice
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, read_attr, read_bytes

# What this reader reads beyond the PCI and block readers (storpath capture takes these).
CAPTURE_SYSFS = (
    "bus/pci/slots/*/address",
    "bus/pci/devices/*/nvme/*/{model,serial}",
    "class/block/sd*/device/{vendor,model,vpd_pg80}",
)

KINDS = ("nvme_controller", "nvme_namespace", "sas_disk", "sata_disk", "hba")

PCI_CLASS_STORAGE = 0x01
PCI_SUBCLASS_NVME = 0x08

_NAMESPACE = re.compile(r"^nvme\d+n\d+$")
_SCSI_DISK = re.compile(r"^sd[a-z]+$")
_ATA_PORT = re.compile(r"^ata\d+$")
_SLOT_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}$")


@datarecord(frozen=True)
class Identity:
    """A device's model and serial, read once per device instance."""

    model: str  # "" when unreadable
    serial: str


@datarecord(frozen=True)
class InventoryDevice:
    """One storage device counted: its kind, name, PCI function, model, serial and slot."""

    kind: str  # one of KINDS
    name: str  # nvme0, nvme0n1, sda; the PCI address for an HBA
    address: str  # the PCI function it is, or sits behind
    model: str
    serial: str
    slot: str  # physical slot of that PCI function, "" when the firmware names none


def parse_slot_address(text: Optional[str]) -> Optional[str]:
    """`0000:03:00` from a slot's `address`; None when empty (an empty slot) or malformed."""
    if text is None:
        return None
    text = text.strip().lower()
    return text if _SLOT_ADDRESS.match(text) else None


def parse_vpd_serial(raw: Optional[bytes]) -> str:
    """The product serial number from a Unit Serial Number VPD page (page code 80h)."""
    if not raw or len(raw) < 4 or raw[1] != 0x80:
        return ""
    length = (raw[2] << 8) | raw[3]
    return parse_identity(raw[4:4 + length].decode("ascii", "replace")) or ""


def padded(text: Optional[str]) -> str:
    """An identity string without its padding, runs of spaces inside as one."""
    return " ".join((parse_identity(text) or "").split())


def storage_kind(device: PciDevice) -> Optional[str]:
    code = device.static.class_code
    if code is None or code >> 16 != PCI_CLASS_STORAGE or device.port_type not in ("endpoint", "legacy_endpoint",
                                                                                     "rc_integrated_endpoint"):
        return None
    return "nvme_controller" if (code >> 8) & 0xFF == PCI_SUBCLASS_NVME else "hba"


def disk_kind(device: BlockDevice) -> Optional[str]:
    if device.virtual:
        return None
    if _NAMESPACE.match(device.name):
        return "nvme_namespace"
    if not _SCSI_DISK.match(device.name):
        return None
    parts = device.real_path.split(os.sep)
    if any(_ATA_PORT.match(p) for p in parts):
        return "sata_disk"
    if any(p.startswith("end_device-") for p in parts):
        return "sas_disk"
    return None


class InventoryReader:
    """Sorts the shared listings into storage devices; reads each device's identity once
    per device instance (a block device's instance is the inode of its class symlink)."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._lock = threading.Lock()
        # address -> (the PciStatic of the instance there, its controller, its identity)
        self._nvme: Dict[str, Tuple[object, str, Identity]] = {}
        self._disks: Dict[Tuple[str, int], Identity] = {}  # (name, inode) -> identity

    def slots(self) -> Dict[str, str]:
        """`domain:bus:device` -> slot name."""
        base = self.roots.sys("bus", "pci", "slots")
        found = {}
        for name in list_dir(base):
            address = parse_slot_address(read_attr(os.path.join(base, name, "address")))
            if address is not None:
                found[address] = name
        return found

    def _nvme_identity(self, device: PciDevice) -> Tuple[str, Identity]:
        base = os.path.join(device.static.path, "nvme")
        names = sorted(list_dir(base))
        if not names:
            return "", Identity("", "")
        ctrl = os.path.join(base, names[0])
        return names[0], Identity(padded(read_attr(os.path.join(ctrl, "model"))),
                                  padded(read_attr(os.path.join(ctrl, "serial"))))

    def _disk_identity(self, device: BlockDevice) -> Identity:
        dev = os.path.join(device.real_path, "device")
        vendor = padded(read_attr(os.path.join(dev, "vendor")))
        model = padded(read_attr(os.path.join(dev, "model")))
        return Identity(" ".join(p for p in (vendor, model) if p),
                        parse_vpd_serial(read_bytes(os.path.join(dev, "vpd_pg80"), 512)))

    def read(self, pci: List[PciDevice], blocks: List[BlockDevice], listing: Iterable[Tuple[str, int]],
             slots: Optional[Dict[str, str]] = None) -> List[InventoryDevice]:
        """The storage devices among the shared listings; `slots` as self.slots() returns
        them (read here when not given)."""
        if slots is None:
            slots = self.slots()
        inodes = dict(listing)
        found: List[InventoryDevice] = []
        with self._lock:
            nvme_seen: Dict[str, Tuple[object, str, Identity]] = {}
            controllers: Dict[str, Tuple[str, Identity]] = {}  # PCI address -> (controller, identity)
            for device in pci:
                kind = storage_kind(device)
                if kind is None:
                    continue
                slot = slots.get(device.address[:-2], "")
                if kind == "hba":
                    s = device.static
                    model = f"{(s.vendor_id or '')[2:]}:{(s.device_id or '')[2:]}"
                    found.append(InventoryDevice(kind, device.address, device.address, model, "", slot))
                    continue
                kept = self._nvme.get(device.address)
                known = kept[1:] if kept is not None and kept[0] is device.static else self._nvme_identity(device)
                nvme_seen[device.address] = (device.static,) + known
                controllers[device.address] = known
                ctrl, ident = known
                found.append(InventoryDevice(kind, ctrl or device.address, device.address, ident.model,
                                             ident.serial, slot))
            self._nvme = nvme_seen
            disks_seen: Dict[Tuple[str, int], Identity] = {}
            for block in blocks:
                kind = disk_kind(block)
                if kind is None:
                    continue
                address = block.pci_address or ""
                slot = slots.get(address[:-2], "") if address else ""
                if kind == "nvme_namespace":
                    ident = controllers.get(address, ("", Identity("", "")))[1]
                else:
                    key = (block.name, inodes.get(block.name, 0))
                    ident = disks_seen[key] = self._disks.get(key) or self._disk_identity(block)
                found.append(InventoryDevice(kind, block.name, address, ident.model, ident.serial, slot))
            self._disks = disks_seen
        return found


def counts(devices: Iterable[InventoryDevice]) -> Dict[str, int]:
    """Devices per kind, every kind present (0 when none): a kind that drops to none stays visible."""
    out = dict.fromkeys(KINDS, 0)
    for device in devices:
        out[device.kind] += 1
    return out
