"""PCI devices and their PCIe links from the text of `lspci -vv` (also -vvv, -nn, -D, -k),
as a support case carries it: a sosreport, a supportconfig, hw-probe, a ticket.

The format is pciutils' (lspci(8); ls-caps.c decodes the capabilities), one block per
function, the header at the first column and the details indented:

    00:01.0 PCI bridge [0604]: Intel Corporation ... [8086:1901] (rev 07) (prog-if 00 [Normal decode])
    	Bus: primary=00, secondary=01, subordinate=01, sec-latency=0
    	NUMA node: 0
    	Capabilities: [a0] Express (v2) Root Port (Slot+), MSI 00
    		LnkCap:	Port #2, Speed 8GT/s, Width x8, ASPM L0s L1, ...
    		LnkSta:	Speed 8GT/s (ok), Width x4 (downgraded)
    		LnkCap2: Supported Link Speeds: 2.5-8GT/s, Crosslink- ...
    	Kernel driver in use: pcieport

Each function becomes the same `readers.pci.PciDevice` the sysfs reader gives, so the one
analysis judges it (no sysfs is faked): the address (domain 0000 unless printed), the class
code and ids (numeric only with -nn; without them the class is taken from its name), the
port type from the Express capability's type, the maximum speed as the kernel's
max_link_speed gives it up to 6.12 (the highest rate of the LnkCap2 vector where lspci
prints it, otherwise LnkCap's), the width from LnkCap, the link as trained from LnkSta, the
NUMA node and driver when shown, and the place in the tree from the bridges' secondary bus
numbers. lspci's own "(downgraded)" compares one end with its own capability only; it is
ignored here: the verdict is both ends', from the analysis.

What a dump cannot show is said (`LspciDump.cannot_show`), never guessed: AER counters
(lspci prints status bits, not counts since boot), the drives and block devices behind the
links, link capabilities where lspci ran without root ("<access denied>"), LnkCap2 where
lspci predates it (pciutils before 3.3 prints none). A speed that the pciutils which wrote the
dump could not name (ls-caps.c's link_speed() prints "unknown" for a Link Speeds value it
does not know: 32 GT/s and 64 GT/s in pciutils older than those generations; its LnkCap2
decoder prints "RsvdP" for vector bits it does not know) is kept unknown and the link is
listed as not judged (`LspciDump.unjudged_links`), never taken as a slower or a matching
rate.

Total on any text (tests/unit/test_lspci_reader.py has a Hypothesis property) and one pass
over the lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple, Union

from storpath.base.records import datarecord
from storpath.base import sysfs
from storpath.base.parse import PCIE_SPEEDS
from storpath.base.problems import INFO, WARNING, Problem
from storpath.readers.host import DMI_FIELDS, HostIdentity, identify, parse_cpuinfo_hypervisor
from storpath.readers.md import MdArray, read_md_arrays
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice, PciStatic, resolve_port_types
from storpath.base.roots import Roots

# ls-caps.c's names of the PCI Express capability's Device/Port Type, in readers.pci's words.
EXPRESS_TYPES = (
    ("Legacy Endpoint", "legacy_endpoint"),
    ("Root Complex Integrated Endpoint", "rc_integrated_endpoint"),
    ("Root Complex Event Collector", "rc_event_collector"),
    ("Endpoint", "endpoint"),
    ("Root Port", "root_port"),
    ("Upstream Port", "upstream_port"),
    ("Downstream Port", "downstream_port"),
    ("PCI-Express to PCI/PCI-X Bridge", "pcie_to_pci_bridge"),
    ("PCI/PCI-X to PCI-Express Bridge", "pci_to_pcie_bridge"),
)
NO_LINK_TYPES = frozenset({"rc_integrated_endpoint", "rc_event_collector"})  # ls-caps.c prints no link for these

# Class names (pci.ids' class list, as lspci prints them without -n) -> class and subclass,
# for dumps without numeric ids: the classes storpath's findings and rules tell apart.
CLASS_NAMES = {
    "SCSI storage controller": 0x0100, "IDE interface": 0x0101, "RAID bus controller": 0x0104,
    "SATA controller": 0x0106, "Serial Attached SCSI controller": 0x0107,
    "Non-Volatile memory controller": 0x0108, "Mass storage controller": 0x0180,
    "Ethernet controller": 0x0200, "Network controller": 0x0280, "Infiniband controller": 0x0207,
    "Fabric controller": 0x0208, "VGA compatible controller": 0x0300, "XGA compatible controller": 0x0301,
    "3D controller": 0x0302, "Display controller": 0x0380, "Host bridge": 0x0600, "ISA bridge": 0x0601,
    "PCI bridge": 0x0604, "CardBus bridge": 0x0607, "Bridge": 0x0680, "USB controller": 0x0c03,
    "Processing accelerators": 0x1200, "SD Host controller": 0x0805,
}

# Functions kept from one dump: a PCI segment holds at most 65,536 (256 buses, 32 devices, 8
# functions: the PCIe spec's Routing ID); the largest servers list a few thousand. A dump listing
# more is cut there and says so (memory bounded whatever it holds).
MAX_FUNCTIONS = 65536
MAX_LINE = 4096  # characters kept of one line (lspci's longest are under 300); the rest is skipped unread

_HEADER = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*)$")
_CLASS_NUMERIC = re.compile(r"^([0-9a-fA-F]{4}): ([0-9a-fA-F]{4}):([0-9a-fA-F]{4})")  # lspci -n
_CLASS_NAMED = re.compile(r"^(.*?)(?: \[([0-9a-fA-F]{4})\])?: ")
_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_PROG_IF = re.compile(r"\(prog-if ([0-9a-fA-F]{2})")
_BUS = re.compile(r"secondary=([0-9a-fA-F]{2})")
_SPEED = re.compile(r"Speed ([0-9]{1,3}(?:\.[0-9])?)\s?G[Tb]/s")
_WIDTH = re.compile(r"Width x([0-9]{1,2})\b")
_VECTOR = re.compile(r"Supported Link Speeds: (?:[0-9.]+-)?([0-9]{1,3}(?:\.[0-9])?)GT/s")
_NUMA = re.compile(r"^NUMA node: ([0-9]{1,4})\s*$")

# What no lspci dump shows, whatever the options.
ALWAYS_MISSING = (
    "AER error counters (lspci shows the status bits of now, not counts since boot)",
    "the drives and block devices behind the links (NVMe namespaces, SAS/SATA links, pools)",
)


@datarecord
class _Function:
    """One function's block as it is read, before it becomes a PciDevice."""

    domain: str
    bus: str
    address: str
    class_code: Optional[int] = None
    vendor_id: Optional[str] = None
    device_id: Optional[str] = None
    subsystem: Tuple[Optional[str], Optional[str]] = (None, None)
    secondary: Optional[str] = None
    numa_node: Optional[int] = None
    express: Optional[str] = None  # the port type; "" once an Express capability is seen with an unknown type
    in_express: bool = False  # the capability being read is the Express one
    cap_speed: Optional[float] = None
    cap_width: Optional[int] = None
    vector_speed: Optional[float] = None
    sta_speed: Optional[float] = None
    sta_width: Optional[int] = None
    driver: Optional[str] = None
    denied: bool = False
    unnamed: List[str] = field(default_factory=list)  # link registers whose speed lspci printed as unknown


@datarecord
class LspciDump:
    """What one lspci text held: the devices (with their port types) and what the dump
    cannot show."""

    devices: List[PciDevice] = field(default_factory=list)
    numeric_ids: bool = False  # lspci ran with -nn (or -n)
    cap2_lines: int = 0  # LnkCap2 lines seen
    link_lines: int = 0  # LnkCap lines seen
    denied: int = 0  # functions whose capabilities lspci could not read (no root)
    guest_vendor: Optional[str] = None  # a hypervisor's emulated device was listed (analysis.virtual's names)
    cut: bool = False  # more than MAX_FUNCTIONS functions: those after the cut are not read
    unnamed_speeds: Dict[str, Tuple[str, ...]] = field(default_factory=dict)  # address -> registers printed unknown

    def unjudged_links(self) -> Dict[str, List[Tuple[str, Tuple[str, ...]]]]:
        """The links whose speed cannot be judged, by their device end (the end a link is
        reported on: an endpoint or a switch's upstream port), each with the functions of
        that link that printed a speed as unknown and in which registers. A port that
        printed it counts for every device below it; a port with nothing below has no link."""
        if not self.unnamed_speeds:
            return {}
        found: Dict[str, List[Tuple[str, Tuple[str, ...]]]] = {}
        for device in self.devices:
            static = device.static
            if not static.has_link or static.parent is None or static.config_port_type in DOWNSTREAM_FACING:
                continue
            ends = [(address, self.unnamed_speeds[address]) for address in (static.address, static.parent)
                    if address in self.unnamed_speeds]
            if ends:
                found[static.address] = ends
        return found

    def cannot_show(self) -> List[str]:
        """What this dump does not say, for the report."""
        found = list(ALWAYS_MISSING)
        if self.denied:
            found.append(f"the link capabilities of {self.denied} function(s): lspci ran without root "
                         "(\"Capabilities: <access denied>\"); run `sudo lspci -vvnn`")
        if self.link_lines and not self.cap2_lines:
            found.append("LnkCap2 (this lspci predates it): the maximum speed is LnkCap's, which a port that "
                         "lists faster rates only in LnkCap2 under-states")
        if self.unnamed_speeds:
            found.append(f"the speed of {len(self.unnamed_speeds)} function(s)' links: the pciutils that wrote "
                         "the dump printed \"Speed unknown\" (too old for their PCIe generation)")
        if self.devices and not self.numeric_ids:
            found.append("vendor and device ids (lspci ran without -nn): classes taken from their names")
        return found


def _hex(text: str) -> str:
    return "0x%04x" % int(text, 16)


def _speed(match: Optional["re.Match[str]"]) -> Optional[float]:
    if match is None:
        return None
    value = float(match.group(1)) * 1e9
    return value if value in PCIE_SPEEDS else None


def _width(match: Optional["re.Match[str]"]) -> Optional[int]:
    return int(match.group(1)) if match is not None else None


def _header(match: "re.Match[str]", dump: LspciDump) -> _Function:
    domain = (match.group(1) or "0000").lower().rjust(4, "0")
    bus, slot, function, rest = match.group(2).lower(), match.group(3).lower(), match.group(4), match.group(5)
    found = _Function(domain=domain, bus=bus, address=f"{domain}:{bus}:{slot}.{function}")
    numeric = _CLASS_NUMERIC.match(rest)
    if numeric:
        class_id, vendor, device = numeric.groups()
        dump.numeric_ids = True
    else:
        named = _CLASS_NAMED.match(rest)
        class_id = named.group(2) if named else None
        ids = _IDS.findall(rest)
        vendor, device = ids[-1] if ids else (None, None)
        if class_id or ids:
            dump.numeric_ids = True
        if class_id is None and named is not None and named.group(1) in CLASS_NAMES:
            found.class_code = CLASS_NAMES[named.group(1)] << 8
    if class_id is not None:
        found.class_code = int(class_id, 16) << 8
    if found.class_code is not None:
        prog_if = _PROG_IF.search(rest)
        if prog_if:
            found.class_code |= int(prog_if.group(1), 16)
    if vendor is not None:
        found.vendor_id, found.device_id = _hex(vendor), _hex(device)
    return found


def _detail(line: str, current: _Function, dump: LspciDump) -> None:
    """One indented line of a function's block."""
    text = line.strip()
    if text.startswith("Capabilities:"):
        if "<access denied>" in text:
            current.denied = True
            return
        current.in_express = False
        if " Express " in text and current.express is None:
            kind = text.partition(" Express ")[2]
            current.express = next((name for words, name in EXPRESS_TYPES if words in kind), "")
            current.in_express = True
        return
    if text.startswith(("LnkCap:", "LnkSta:", "LnkCap2:")) and current.in_express and (
            "Speed unknown" in text or "Speeds: RsvdP" in text):
        current.unnamed.append(text.partition(":")[0])
    if text.startswith("LnkCap:"):
        if current.in_express:
            dump.link_lines += 1
            current.cap_speed, current.cap_width = _speed(_SPEED.search(text)), _width(_WIDTH.search(text))
    elif text.startswith("LnkSta:"):
        if current.in_express:
            current.sta_speed, current.sta_width = _speed(_SPEED.search(text)), _width(_WIDTH.search(text))
    elif text.startswith("LnkCap2:"):
        if current.in_express:
            dump.cap2_lines += 1
            current.vector_speed = _speed(_VECTOR.search(text))
    elif text.startswith("Bus: "):
        match = _BUS.search(text)
        current.secondary = match.group(1).lower() if match else None
    elif text.startswith("NUMA node:"):
        match = _NUMA.match(text)
        current.numa_node = int(match.group(1)) if match else None
    elif text.startswith("Subsystem:"):
        ids = _IDS.findall(text)
        if ids:
            current.subsystem = (_hex(ids[-1][0]), _hex(ids[-1][1]))
    elif text.startswith("Kernel driver in use:"):
        current.driver = text.partition(":")[2].strip() or None


def _device(found: _Function, parent: Optional[str]) -> PciDevice:
    has_link = found.express is not None
    no_link = found.express in NO_LINK_TYPES
    # The kernel's max_link_speed up to 6.12 (pcie_get_speed_cap): the top of the LnkCap2 vector
    # where the register is implemented, else LnkCap's Max Link Speed.
    max_speed = None if no_link else (found.vector_speed or found.cap_speed)
    static = PciStatic(
        address=found.address, parent=parent, class_code=found.class_code, vendor_id=found.vendor_id,
        device_id=found.device_id, subsystem_vendor_id=found.subsystem[0], subsystem_device_id=found.subsystem[1],
        numa_node=found.numa_node, max_link_speed=max_speed,
        max_link_width=None if no_link else found.cap_width, has_link=has_link,
        config_port_type=found.express or None, aer_files=())
    return PciDevice(static=static, driver=found.driver,
                     current_link_speed=None if no_link else found.sta_speed,
                     current_link_width=None if no_link else found.sta_width)


def parse_lspci(text: Union[str, Iterable[str]]) -> Tuple[LspciDump, List[Problem]]:
    """The devices of an lspci -vv text (a string, or its lines one by one: a file streamed,
    never held whole), and the problems met (none of which stops the parse: any text gives a
    dump, possibly empty). At most MAX_FUNCTIONS functions are kept (memory bounded whatever
    the size of the text): past them the dump is `cut`. No I/O."""
    dump = LspciDump()
    functions: List[_Function] = []
    seen: Dict[str, int] = {}
    problems: List[Problem] = []
    current: Optional[_Function] = None
    for line in (text.splitlines() if isinstance(text, str) else text):
        if not line:
            continue
        if line[0] in " \t":
            if current is not None:
                _detail(line, current, dump)
            continue
        match = _HEADER.match(line)
        current = None
        if match is None:
            continue  # a heading of the file around the dump (a supportconfig section, a prompt)
        found = _header(match, dump)
        if found.address in seen:
            problems.append(Problem("lspci dump lists a function twice, keeping the first",
                                    (("address", found.address),), WARNING))
            continue
        if len(functions) >= MAX_FUNCTIONS:
            dump.cut = True
            break
        seen[found.address] = len(functions)
        functions.append(found)
        current = found
    del seen
    # A function's bridge is the one whose secondary bus is the function's bus (in its domain);
    # a bus no bridge leads to hangs below a host bridge.
    bridges = {(f.domain, f.secondary): f.address for f in functions if f.secondary is not None}
    # lspci prints a NUMA node only where sysfs' numa_node is not -1: once it printed one, a
    # function without the line is one the firmware placed on no node (-1, as sysfs says).
    if any(f.numa_node is not None for f in functions):
        for found in functions:
            found.numa_node = -1 if found.numa_node is None else found.numa_node
    for found in functions:
        parent = bridges.get((found.domain, found.bus))
        dump.devices.append(_device(found, parent if parent != found.address else None))
        dump.denied += found.denied
        if found.unnamed and found.express not in NO_LINK_TYPES:
            dump.unnamed_speeds[found.address] = tuple(found.unnamed)
        vendor = found.vendor_id if found.vendor_id in _GUEST_VENDORS else found.subsystem[0]
        if dump.guest_vendor is None and vendor in _GUEST_VENDORS:
            dump.guest_vendor = _GUEST_VENDORS[vendor]
    resolve_port_types(dump.devices)
    if not functions:
        problems.append(Problem("no PCI function found in the lspci text (is it `lspci -vv` output?)", (), WARNING))
    elif dump.denied:
        problems.append(Problem("lspci ran without root: no link capabilities for some functions",
                                (("functions", dump.denied),), INFO))
    return dump, problems


# A hypervisor's emulated devices (and QEMU's q35 host bridge's subsystem, Red Hat 1af4): a dump
# listing one is a virtual machine's (readers.host's names).
_GUEST_VENDORS = {"0x1b36": "qemu", "0x1af4": "kvm", "0x15ad": "vmware", "0x1414": "microsoft", "0x5853": "xen",
                  "0x80ee": "oracle", "0x1ab8": "parallels"}


# ---- where a support archive keeps it -------------------------------------------------

# Inside a sosreport (sos's pci plugin runs `lspci -nnvv`; older ones `lspci -nvv`), hw-probe's
# upload (logs/lspci: `lspci -vvnn`), and a supportconfig's hardware.txt (a section per command).
SOS_LSPCI = ("sos_commands/pci/lspci_-nnvv", "sos_commands/pci/lspci_-nvv", "sos_commands/pci/lspci_-vvnn",
             "sos_commands/pci/lspci_-vv", "lspci", "logs/lspci")
SUPPORTCONFIG_HARDWARE = "hardware.txt"
SECTION = "#==["  # a supportconfig section starts so; its next line is `# <command or file>`
MAX_TEXT = 16 << 20  # bytes kept of a small file read whole (/proc/cpuinfo: about 1 MB for 512 CPUs)


def _section_lines(lines: Iterable[str], wanted) -> Iterator[str]:
    """The body lines of the first section of supportconfig lines whose command line (`#
    /sbin/lspci -nnvv`) satisfies `wanted`, one by one."""
    heading = inside = False
    for line in lines:
        if line.startswith(SECTION):
            if inside:
                return
            heading = True
            continue
        if heading:
            heading = False
            inside = wanted(line)
            continue
        if inside:
            yield line


def _is_lspci_vv(command: str) -> bool:
    words = command.lstrip("# ").split()
    return bool(words) and os.path.basename(words[0]) == "lspci" and any("vv" in w for w in words[1:])


def _open(path: str, folder: Optional[str]) -> int:
    """The regular file at `path` open for reading (with `folder`: inside that folder once its
    links are followed), by sysfs.open_inside: a FIFO, a device node or a socket is never opened
    for reading, a link out of the folder never followed to a read; OSError saying why."""
    try:
        return sysfs.open_inside(path, os.path.realpath(folder) if folder is not None else None)
    except sysfs.Refused as exc:
        raise OSError(f"{path}: {exc.strerror}") from None


def _read_text(path: str, folder: Optional[str] = None) -> str:
    """The text of a small file (/proc/cpuinfo), up to MAX_TEXT bytes."""
    fd = _open(path, folder)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_TEXT).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _lines(fd: int) -> Iterator[str]:
    """The lines of the file open at `fd`, one by one, each at most MAX_LINE characters (the
    rest of a longer one is skipped in bounded pieces): memory bounded whatever the file's size."""
    with os.fdopen(fd, "rb", buffering=1 << 16, closefd=False) as f:
        while True:
            line = f.readline(MAX_LINE)
            if not line:
                return
            if not line.endswith(b"\n"):
                rest = line
                while rest and not rest.endswith(b"\n"):
                    rest = f.readline(MAX_LINE)
            yield line.decode("utf-8", "replace").rstrip("\r\n")


@datarecord
class DumpFiles:
    """Where a support archive (or one file) keeps the lspci text, and /proc/cpuinfo's text
    where the archive kept it (whether the machine is a VM). The lspci text is streamed
    (`lines`), never read whole."""

    path: str  # the file holding the lspci text
    origin: str
    cpuinfo: Optional[str] = None
    folder: Optional[str] = None  # the archive's folder, where it was one
    section: bool = False  # the lspci text is a supportconfig section of `path`

    def lines(self) -> Iterator[str]:
        fd = _open(self.path, self.folder)
        try:
            lines = _lines(fd)
            yield from (_section_lines(lines, _is_lspci_vv) if self.section else lines)
        finally:
            os.close(fd)


def _has_lspci_section(path: str, folder: str) -> bool:
    fd = _open(path, folder)
    try:
        heading = False
        for line in _lines(fd):
            if heading and _is_lspci_vv(line):
                return True
            heading = line.startswith(SECTION)
        return False
    finally:
        os.close(fd)


def find_dump(path: str) -> DumpFiles:
    """Where the lspci -vv text at `path` is: the file itself, or the one a sosreport,
    hw-probe upload or supportconfig folder holds. OSError (FileNotFoundError naming what was
    looked for) when there is none."""
    if not os.path.isdir(path):
        os.close(_open(path, None))  # refused now, not once the report has begun
        return DumpFiles(path, path)
    cpuinfo = None
    for name in ("proc/cpuinfo",):
        if os.path.lexists(os.path.join(path, name)):
            cpuinfo = _read_text(os.path.join(path, name), path)
    for name in SOS_LSPCI:
        candidate = os.path.join(path, name)
        if os.path.lexists(candidate):
            os.close(_open(candidate, path))
            return DumpFiles(candidate, candidate, cpuinfo, path)
    hardware = os.path.join(path, SUPPORTCONFIG_HARDWARE)
    if os.path.lexists(hardware) and _has_lspci_section(hardware, path):
        if cpuinfo is None:
            fd = _open(hardware, path)
            try:
                kept: List[str] = []
                size = 0
                for line in _section_lines(_lines(fd), lambda line: line.strip().endswith("/proc/cpuinfo")):
                    size += len(line) + 1
                    if size > MAX_TEXT:
                        break
                    kept.append(line)
                cpuinfo = "\n".join(kept) or None
            finally:
                os.close(fd)
        return DumpFiles(hardware, f"{hardware} (its lspci -vv section)", cpuinfo, path, section=True)
    raise FileNotFoundError(f"no lspci -vv output in {path}: looked for {', '.join(SOS_LSPCI)} and an "
                            f"lspci -vv section of {SUPPORTCONFIG_HARDWARE}")


@datarecord
class DumpRecord:
    """An lspci dump read: the devices, the machine as far as the dump says, where it came from."""

    dump: LspciDump
    host: HostIdentity
    origin: str
    md: Optional[List[MdArray]] = None  # from the archive's proc/mdstat (and sys/block/md*/md), where it kept them
    cut: bool = False  # the dump listed more than MAX_FUNCTIONS functions: those after the cut are not judged


def read_dump(path: str) -> Tuple[DumpRecord, List[Problem]]:
    """The lspci dump at `path` (a file, or a sosreport/supportconfig/hw-probe folder), parsed.
    Whether the machine was a virtual machine: from the archive's /proc/cpuinfo where it kept
    one, else from the dump (a hypervisor's emulated device listed, analysis.virtual's ids).
    OSError when there is nothing to read."""
    files = find_dump(path)
    dump, problems = parse_lspci(files.lines())
    flag = parse_cpuinfo_hypervisor(files.cpuinfo)
    if flag is not None:
        host = identify({}, flag, None)
    elif dump.guest_vendor is not None:
        host = HostIdentity({k: "" for k in DMI_FIELDS}, dump.guest_vendor, "vm",
                            f"the lspci dump lists emulated devices ({dump.guest_vendor})")
    else:
        host = HostIdentity({k: "" for k in DMI_FIELDS}, "", "none",
                            "the lspci dump lists no hypervisor's emulated device")
    if dump.cut:
        problems = problems + [Problem("lspci dump cut", (("file", files.origin),
                                                          ("after_functions", str(MAX_FUNCTIONS))), level=WARNING)]
    md = None
    if files.folder is not None and os.path.lexists(os.path.join(files.folder, "proc", "mdstat")):
        # A sosreport keeps /proc/mdstat and (its md plugin) /sys/block/md*/md: the md reader reads
        # them as it reads a machine's, every file inside the archive (sysfs.inside): a link out
        # of it, a FIFO or a device node is refused, not opened, and said as a finding.
        sys_folder = os.path.join(files.folder, "sys")
        roots = Roots(sysfs=sys_folder if os.path.isdir(sys_folder) else files.folder,
                      procfs=os.path.join(files.folder, "proc"), dev="")
        with sysfs.inside(files.folder) as refusals:
            try:
                md, md_problems = read_md_arrays(roots)
                problems = problems + list(md_problems)
            except sysfs.RootUnreadable as exc:
                refusals.append(str(exc))
        for why in dict.fromkeys(refusals):
            problems = problems + [Problem("md attributes of the archive not read", (("why", why),),
                                           level=WARNING)]
    return DumpRecord(dump, host, files.origin, md, dump.cut), problems
