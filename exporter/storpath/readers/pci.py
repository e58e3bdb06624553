"""PCI devices and their PCIe links, from /sys/bus/pci/devices/*.

Attributes (Documentation/ABI/testing/sysfs-bus-pci): class, vendor, device,
subsystem_vendor, subsystem_device (hex), numa_node, current_link_speed,
max_link_speed ("16.0 GT/s PCIe"), current_link_width, max_link_width (lanes),
aer_dev_correctable / aer_dev_nonfatal / aer_dev_fatal (one "NAME count" per line,
with a TOTAL_ERR_* line), config (config space; unprivileged readers get only the
first 64 bytes, which hold no PCIe capability).

What cannot change while a device is present (ids, class, maximum speed and width,
port type, place in the tree) is read once per device instance. A device instance is
recognised by the inode of its /sys/bus/pci/devices symlink, which the kernel creates
anew when a device is removed and another appears at the same address.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import field
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int, parse_numa_node
from storpath.base.parse import parse_pcie_speed, parse_pcie_speed_raw, parse_pcie_width, parse_pcie_width_raw
from storpath.base.problems import Problem
from storpath.readers.instances import InstanceCache
from storpath.readers.power import read_sleep, read_suspended_seconds
from storpath.readers.pcie_cooling import attach_link_cooling
from storpath.base.roots import Roots
from storpath.base.sysfs import link_name, list_entries, read_attr, read_attr_why, read_bytes, read_many

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

# PCI Express Capabilities Register, Device/Port Type field (PCIe base spec 7.5.3.2).
PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}

# What this reader reads (storpath capture takes these; see report/capture/files.py).
CAPTURE_SYSFS = (
    "bus/pci/devices/*",
    "bus/pci/devices/*/{class,vendor,device,subsystem_vendor,subsystem_device,numa_node,local_cpulist,"
    "max_link_speed,max_link_width,current_link_speed,current_link_width,aer_dev_correctable,aer_dev_nonfatal,"
    "aer_dev_fatal,config,driver,physfn}",
)

AER_FILES = (("correctable", "aer_dev_correctable"), ("nonfatal", "aer_dev_nonfatal"), ("fatal", "aer_dev_fatal"))



@datarecord(frozen=True)
class PciStatic:
    """What stays true for as long as this device instance exists."""

    address: str
    parent: Optional[str]  # PCI address of the bridge above, None below a host bridge
    class_code: Optional[int]  # 24-bit class code, e.g. 0x010802 for NVMe
    vendor_id: Optional[str]
    device_id: Optional[str]
    subsystem_vendor_id: Optional[str]
    subsystem_device_id: Optional[str]
    numa_node: Optional[int]  # -1 when the firmware did not say
    max_link_speed: Optional[float]  # transfers per second
    max_link_width: Optional[int]
    has_link: bool  # the device has a link of its own (link attributes, and not an SR-IOV virtual function)
    config_port_type: Optional[str]  # from the PCIe capability, when config space was readable
    aer_files: Tuple[Tuple[str, str], ...]  # (severity, file name) of the AER counters present
    path: str = ""  # the device's own directory under /sys/devices, for the attributes read every scrape
    # False: the device slept when first seen, so what reading would have woken it (its link's
    # capability, config space) is not read yet; read once it is awake (storpath.readers.power)
    complete: bool = True


@datarecord(slots=True)
class PciDevice:
    """One PCI function: its fixed identity, and its driver, link, AER totals and power state as last read."""

    static: PciStatic
    driver: Optional[str]
    current_link_speed: Optional[float]
    current_link_width: Optional[int]
    aer_totals: Dict[str, int] = field(default_factory=dict)
    port_type: Optional[str] = None  # filled in by resolve_port_types()
    address: str = ""
    # The state the device sleeps in ("D3cold", "D3hot", "suspended"; storpath.readers.power),
    # None when awake. A sleeping device's link is not read: current_link_* are then the link
    # as last read while it was awake (link_read_at: when, Unix time), or None if never.
    asleep: Optional[str] = None
    link_read_at: Optional[float] = None
    suspended_seconds: Optional[float] = None  # time runtime-suspended since boot, where the kernel says
    # Link Control 2's Target Link Speed, re-read every scrape for links below their own maximum
    # only (the kernel, firmware or a tool may change it at run time); None: not read or unreadable.
    target_link_speed: Optional[float] = None
    link_cooling: Optional[object] = None  # readers.pcie_cooling.LinkCooling of this port, if any

    def __post_init__(self) -> None:
        self.address = self.static.address


def parse_aer_total(raw) -> Optional[int]:
    """The TOTAL_ERR_* line of an aer_dev_* file, as read (bytes) or as text."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "replace")
    _, found, rest = raw.rpartition(b"TOTAL_ERR_")
    if not found:
        return None
    count = rest.partition(b" ")[2].partition(b"\n")[0]
    if count.isdigit() and len(count) <= 20:  # (bytes: ASCII digits only) as parse_int takes them, without its decoding
        value = int(count)
        return value if value < 1 << 64 else None
    return parse_int(count, minimum=0, maximum=(1 << 64) - 1)


def parse_port_type(config: Optional[bytes]) -> Optional[str]:
    """Device/Port Type from the PCI Express capability in config space.

    Walks the capability list from the pointer at 0x34. Returns None when the bytes
    do not reach the capability (an unprivileged read gets 64 bytes only).
    """
    if not config or len(config) < 0x40:
        return None
    status = config[0x06] | (config[0x07] << 8)
    if not status & 0x10:  # no capability list
        return None
    pointer = config[0x34] & 0xFC
    seen = set()
    while pointer and pointer not in seen and pointer + 4 <= len(config):
        seen.add(pointer)
        cap_id, next_ptr = config[pointer], config[pointer + 1] & 0xFC
        if cap_id == 0x10:
            flags = config[pointer + 2] | (config[pointer + 3] << 8)
            return PORT_TYPES.get((flags >> 4) & 0xF, "unknown")
        pointer = next_ptr
    return None


# Link Control 2, Target Link Speed (PCIe Base Spec 7.5.3.19, bits 3:0 at the PCIe capability
# + 0x30): an index into the Supported Link Speeds Vector, 1 = 2.5 GT/s ... 6 = 64 GT/s.
TARGET_LINK_SPEEDS = {1: 2.5e9, 2: 5e9, 3: 8e9, 4: 16e9, 5: 32e9, 6: 64e9}
LINK_CONTROL_2 = 0x30


def pcie_capability_offset(config: Optional[bytes]) -> Optional[int]:
    """Offset of the PCI Express capability (ID 0x10) in config space, or None when the bytes
    do not reach it."""
    if not config or len(config) < 0x40 or not (config[0x06] | (config[0x07] << 8)) & 0x10:
        return None
    pointer, seen = config[0x34] & 0xFC, set()
    while pointer and pointer not in seen and pointer + 4 <= len(config):
        seen.add(pointer)
        if config[pointer] == 0x10:
            return pointer
        pointer = config[pointer + 1] & 0xFC
    return None


def parse_target_link_speed(config: Optional[bytes]) -> Optional[float]:
    """Target Link Speed (transfers per second) from Link Control 2; None when config space
    was not readable that far (an unprivileged read: 64 bytes) or the field holds a value the
    spec reserves. Never a guess."""
    offset = pcie_capability_offset(config)
    if offset is None or offset + LINK_CONTROL_2 + 2 > len(config):
        return None
    return TARGET_LINK_SPEEDS.get(config[offset + LINK_CONTROL_2] & 0xF)


# Read once per device instance (besides max_link_speed, config and the AER files); the kernel
# keeps them without asking the device (the link's are read only while it is awake).
STATIC_ATTRIBUTES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "numa_node")


def parse_static(address: str, real_path: str, texts: Dict[str, Optional[str]], has_link: bool,
                 config: Optional[bytes], aer_files: Tuple[Tuple[str, str], ...], complete: bool = True
                 ) -> Tuple[PciStatic, List[Tuple[str, str]]]:
    """A device instance's static record from the texts of its attributes (None: absent),
    and (attribute, reason) for each attribute present but not usable. No I/O."""
    problems: List[Tuple[str, str]] = []
    class_text = texts.get("class")
    try:
        class_code = int(class_text, 16) if class_text else None
    except ValueError:
        class_code = None
        problems.append(("class", f"unparsable {class_text!r}"))
    numa_text = texts.get("numa_node")
    numa_node = parse_numa_node(numa_text)
    if numa_text is not None and numa_node is None:
        problems.append(("numa_node", f"unparsable {numa_text!r}"))
    max_speed = max_width = None
    # Link Capabilities all zero ("Unknown", width 0) is a root-complex integrated endpoint, e.g. a
    # device passed through onto a VM's root bus: no link, nothing to warn about.
    if has_link and complete and not (texts.get("max_link_speed") == "Unknown"
                                      and texts.get("max_link_width") == "0"):
        max_speed, why = parse_pcie_speed(texts.get("max_link_speed"))
        if why:
            problems.append(("max_link_speed", why))
        max_width, why = parse_pcie_width(texts.get("max_link_width"), allow_zero=False)
        if why:
            problems.append(("max_link_width", why))
    return PciStatic(
        address=address,
        parent=_parent_address(real_path),
        class_code=class_code,
        vendor_id=_hex_id(texts.get("vendor")),
        device_id=_hex_id(texts.get("device")),
        subsystem_vendor_id=_hex_id(texts.get("subsystem_vendor")),
        subsystem_device_id=_hex_id(texts.get("subsystem_device")),
        numa_node=numa_node,
        max_link_speed=max_speed,
        max_link_width=max_width,
        has_link=has_link,
        config_port_type=parse_port_type(config),
        aer_files=aer_files,
        path=real_path,
        complete=complete,
    ), problems


def _parent_address(real_path: str) -> Optional[str]:
    parent = os.path.basename(os.path.dirname(real_path))
    return parent if PCI_ADDRESS.match(parent) else None


def _hex_id(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    try:
        return "0x%04x" % int(text, 16)
    except ValueError:
        return None


class PciReader:
    """Reads every PCI device; keeps each device instance's static record between calls.
    Thread-safe."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._statics = InstanceCache()  # address -> PciStatic of the device instance there
        self._lock = threading.Lock()
        self._problems: List[Problem] = []  # met during the current read
        self._awake: Dict[str, _Awake] = {}  # address -> the link last read while the device was awake
        self._last_read: Optional[float] = None  # when the last read began

    def _warn(self, address: str, attr: str, reason: str) -> None:
        self._problems.append(Problem("PCI attribute not usable, leaving it out",
                                      (("address", address), ("attribute", attr), ("reason", reason))))

    def _read_static(self, address: str, path: str) -> PciStatic:
        """The reads behind a device instance's static record; parse_static makes it. A device
        asleep (storpath.readers.power) is not woken: its link's capability and config space
        wait until it is awake (the record is then incomplete, and read again)."""
        texts = {name: read_attr(os.path.join(path, name)) for name in STATIC_ATTRIBUTES}
        # A virtual function (SR-IOV: a `physfn` link to its physical function) has no link of
        # its own: it uses its PF's. The SR-IOV specification reserves a VF's Link registers, so
        # the kernel may show Unknown and width 0 there, which would read as a link that is down.
        speed_error = None
        asleep = read_sleep(path) is not None
        if asleep:
            speed_present = os.path.exists(os.path.join(path, "max_link_speed"))
        else:
            texts["max_link_width"] = read_attr(os.path.join(path, "max_link_width"))
            texts["max_link_speed"], speed_error = read_attr_why(os.path.join(path, "max_link_speed"))
            speed_present = texts["max_link_speed"] is not None
        has_link = ((speed_present or os.path.exists(os.path.join(path, "max_link_width")))
                    and not os.path.islink(os.path.join(path, "physfn")))
        aer_files = tuple((sev, name) for sev, name in AER_FILES if os.path.exists(os.path.join(path, name)))
        if asleep:
            static, problems = parse_static(address, os.path.realpath(path), texts, has_link, None, aer_files,
                                            complete=False)
        else:
            config = read_bytes(os.path.join(path, "config"), 256)
            if config is not None and config[:4] == b"\xff\xff\xff\xff":
                config = None  # all-ones: the device did not answer (it went to sleep as it was read)
            static, problems = parse_static(address, os.path.realpath(path), texts, has_link, config, aer_files)
        for attribute, reason in problems:
            self._warn(address, attribute, speed_error if attribute == "max_link_speed" and speed_error else reason)
        return static

    def read(self) -> Tuple[List[PciDevice], List[Problem]]:
        """Every PCI device with its port type (resolve_port_types), and the attributes
        that could not be used."""
        base = self.roots.sys("bus", "pci", "devices")
        devices: List[PciDevice] = []
        with self._lock:
            self._problems = []
            now = time.time()
            for address, path, static in self._statics.refresh(base, list_entries(base, self.roots.sysfs),
                                                                self._read_static):
                asleep = read_sleep(static.path) if static.has_link else None
                if not static.complete and asleep is None:  # awake now: what waited can be read
                    static = self._read_static(address, path)
                    self._statics.replace(address, static)
                device = self._read_device(static, asleep)
                if device is None:  # removed since the listing
                    self._statics.forget(address)
                    self._awake.pop(address, None)
                    continue
                if static.has_link:
                    self._remember(device, now)
                devices.append(device)
            if len(self._awake) > len(devices):
                present = {d.address for d in devices}
                for gone in [a for a in self._awake if a not in present]:
                    del self._awake[gone]
            self._last_read = now
            problems, self._problems = self._problems, []
        resolve_port_types(devices)
        attach_link_cooling(self.roots, devices)
        return devices, problems

    def _remember(self, device: PciDevice, now: float) -> None:
        """Keep an awake device's link as read (the one served while it sleeps); give a sleeping
        one the link it last had while awake, and since when (the read before it slept)."""
        seen = self._awake.get(device.address)
        if device.asleep is None:
            if seen is None or seen.static is not device.static or seen.speed != device.current_link_speed \
                    or seen.width != device.current_link_width or seen.read_at is not None:
                self._awake[device.address] = _Awake(device.static, device.current_link_speed,
                                                     device.current_link_width)
            return
        if seen is None or seen.static is not device.static:
            return
        if seen.read_at is None:
            seen.read_at = self._last_read if self._last_read is not None else now
        device.current_link_speed, device.current_link_width = seen.speed, seen.width
        device.link_read_at = seen.read_at

    def _read_device(self, static: PciStatic, asleep: Optional[str] = None) -> Optional[PciDevice]:
        """What changes while the device exists: its driver, its link as trained, its AER
        counters, read in one pass (the link's current speed and width, then the AER files).
        None when the device is gone. A sleeping device's link is not read."""
        at = static.path + "/"
        driver = link_name(at + "driver")
        speed = width = None
        aer_paths = [at + name for _, name in static.aer_files]
        if static.has_link and asleep is None:
            raws = read_many([at + "current_link_speed", at + "current_link_width", *aer_paths])
            speed_raw, width_raw = raws[0], raws[1]
            if speed_raw is None and width_raw is None and not os.path.isdir(static.path):
                return None
            speed, why = parse_pcie_speed_raw(speed_raw)
            if why and static.max_link_width is not None:  # (no link capability: Unknown is right)
                self._warn(static.address, "current_link_speed", why)
            width, why = parse_pcie_width_raw(width_raw, allow_zero=True)
            if why:
                self._warn(static.address, "current_link_width", why)
            aer_raws = raws[2:]
        else:
            if (driver is None or asleep is not None) and not os.path.isdir(static.path):
                return None
            # A sleeping device's AER files are kept by the kernel, not read from the device.
            aer_raws = read_many(aer_paths) if aer_paths else ()
        device = PciDevice(static=static, driver=driver, current_link_speed=speed, current_link_width=width)
        if speed is not None and static.max_link_speed is not None and speed < static.max_link_speed:
            device.target_link_speed = parse_target_link_speed(read_bytes(at + "config", 256))
        if asleep is not None:
            device.asleep = asleep
            device.suspended_seconds = read_suspended_seconds(static.path)
        if aer_raws:
            totals = device.aer_totals
            for (severity, _), raw in zip(static.aer_files, aer_raws):
                total = parse_aer_total(raw)
                if total is not None:
                    totals[severity] = total
        return device


@datarecord
class _Awake:
    """A device instance's link as last read while awake; `read_at` is set when it is found
    asleep: the time of the read before (the last one that saw it awake)."""

    static: PciStatic
    speed: Optional[float]
    width: Optional[int]
    read_at: Optional[float] = None


# Ports whose link leads away from the root complex, to the device below them.
DOWNSTREAM_FACING = frozenset({"root_port", "downstream_port", "pci_to_pcie_bridge"})

PCI_CLASS_BRIDGE_PCI = 0x0604

MAX_DEPTH = 64  # deeper than any PCI tree: a guard against a loop in a broken one


def path_to_root(device: Optional[PciDevice], by_address: Mapping[str, PciDevice]) -> Iterator[PciDevice]:
    """`device` and every device above it (its bridge, that bridge's bridge...), nearest
    first, up to the last one below a host bridge. The one walk up the PCI tree."""
    node, hops = device, 0
    while node is not None and hops < MAX_DEPTH:
        yield node
        hops += 1
        parent = node.static.parent
        node = by_address.get(parent) if parent else None



def resolve_port_types(devices: List[PciDevice]) -> None:
    """Port type from config space where it was readable, otherwise from the topology:
    a bridge straight below a host bridge is a root port, and a bridge below an upstream
    port is a switch's downstream port. A bridge below a downstream-facing port is a
    switch's upstream port when a bridge with a PCIe link (a downstream port) is below it;
    with only functions that have no link attributes below it (conventional PCI: a BMC's
    video behind an AST1150, SH7757/SH7758, Pilot4 or PLDA bridge) it is a PCIe-to-PCI
    bridge; with nothing below it, unknown. Everything else is an endpoint."""
    by_address = {d.address: d for d in devices}
    below: Dict[str, List[PciStatic]] = {}
    for d in devices:
        if d.static.parent:
            below.setdefault(d.static.parent, []).append(d.static)

    def behind_downstream_port(bridge: PciDevice) -> str:
        children = below.get(bridge.address, [])
        if any(c.has_link and c.class_code is not None and c.class_code >> 8 == PCI_CLASS_BRIDGE_PCI
               for c in children):
            return "upstream_port"
        if children and not any(c.has_link for c in children):
            return "pcie_to_pci_bridge"
        return "unknown"

    def depth(d: PciDevice) -> int:
        return sum(1 for _ in path_to_root(d, by_address))

    for device in sorted(devices, key=depth):
        static = device.static
        if static.config_port_type:
            device.port_type = static.config_port_type
            continue
        if static.class_code is not None and static.class_code >> 8 == PCI_CLASS_BRIDGE_PCI:
            parent = by_address.get(static.parent) if static.parent else None
            if parent is None:
                device.port_type = "root_port"
            elif parent.port_type in DOWNSTREAM_FACING:
                device.port_type = behind_downstream_port(device)
            elif parent.port_type == "upstream_port":
                device.port_type = "downstream_port"
            else:
                device.port_type = "unknown"
        else:
            device.port_type = "endpoint"
