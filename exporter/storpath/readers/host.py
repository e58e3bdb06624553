"""What machine this is: its DMI identity and whether it is a virtual machine.

Sources:
- /sys/class/dmi/id/{sys_vendor,product_name,board_vendor,board_name,bios_vendor,bios_version}
  (Documentation/ABI/testing/sysfs-class-dmi-id-id; world-readable, unlike the serial numbers,
  which are not read). Absent on machines without SMBIOS (many arm64 boards).
- /proc/cpuinfo's `flags` line: x86 CPUs report the `hypervisor` flag (CPUID leaf 1, ECX bit
  31) inside a guest of any hypervisor.
- /sys/hypervisor/type: `xen` in a Xen guest (also a paravirtualised one, which has no DMI).

None of it changes while the machine runs: it is read once, at start.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_identity
from storpath.base.roots import Roots
from storpath.base.sysfs import read_attr, read_bytes

DMI_FIELDS = ("sys_vendor", "product_name", "board_vendor", "board_name", "bios_vendor", "bios_version")

# What DMI strings give a hypervisor away, and the name systemd-detect-virt uses for it
# (systemd's src/basic/virt.c keeps the same table; its names are what operators know).
# Matched as a prefix of sys_vendor, product_name, board_vendor or bios_vendor.
_DMI_VENDORS = (
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("Amazon EC2", "amazon"),  # Nitro; also on *.metal instances, which have no `hypervisor` flag
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Hyper-V", "microsoft"),
    ("Apple Virtualization", "apple"),
    ("Google Compute Engine", "google"),
)
# Hyper-V guests say `Microsoft Corporation` / `Virtual Machine` (a Surface says Microsoft too).
_MICROSOFT_VM = ("Microsoft Corporation", "Virtual Machine")

# What firmware leaves in an SMBIOS string nobody filled in: AMI's and Insyde's defaults, ASUS
# desktop boards' `System Product Name`, Supermicro boards' `Super Server` (the board name is
# the model there), compared without case. From published dmidecode output of such machines.
_PLACEHOLDERS = frozenset(text.casefold() for text in (
    "To be filled by O.E.M.", "To Be Filled By O.E.M.", "O.E.M.", "OEM", "Default string", "System Product Name",
    "System manufacturer", "System Version", "Not Applicable", "Not Specified", "None", "Unknown", "N/A",
    "Type1ProductConfigId", "Super Server", "All Series", "Product Name", "Invalid", "123456789", "x.x",
))


def placeholder(text: str) -> bool:
    """True for an empty SMBIOS string or one firmware leaves unfilled."""
    return text.strip().casefold() in _PLACEHOLDERS or not text.strip()


# What `storpath capture` saves for this reader (globs relative to the sysfs and procfs roots).
CAPTURE_SYSFS = ("class/dmi/id", "class/dmi/id/{%s}" % ",".join(DMI_FIELDS), "hypervisor/type")
CAPTURE_PROCFS = ("cpuinfo",)

_FLAGS = re.compile(r"^flags\s*:(.*)$", re.M)


@datarecord(frozen=True)
class HostIdentity:
    """What machine this is: its DMI fields, whether it is a VM (which hypervisor), and why."""

    dmi: Dict[str, str]  # DMI_FIELDS that could be read ("" when absent)
    hypervisor: str  # systemd-detect-virt's name (kvm, qemu, vmware, microsoft, xen, amazon...), "" on bare metal
    virtualization: str  # "vm", "none" (bare metal), or "unknown" (nothing could be read)
    evidence: str  # what the verdict rests on, for `storpath check`

    @property
    def virtual(self) -> bool:
        return self.virtualization == "vm"

    @property
    def model(self) -> Tuple[str, str]:
        """(vendor, name) that hosts of one build share: the product's, or the board's where
        the product name is a placeholder (ASUS desktops, Supermicro servers); name "" where
        both are, so whitebox machines are not taken for one model."""
        dmi = self.dmi
        vendor = dmi["sys_vendor"] if not placeholder(dmi["sys_vendor"]) else dmi["board_vendor"]
        if not placeholder(dmi["product_name"]):
            return vendor, dmi["product_name"]
        if not placeholder(dmi["board_name"]):
            return (dmi["board_vendor"] if not placeholder(dmi["board_vendor"]) else vendor), dmi["board_name"]
        return ("" if placeholder(vendor) else vendor), ""

def parse_cpuinfo_hypervisor(text: Optional[str]) -> Optional[bool]:
    """True if the first `flags` line of /proc/cpuinfo lists `hypervisor`; None when the text
    has no `flags` line (not x86, or unreadable)."""
    if not text:
        return None
    match = _FLAGS.search(text)
    if match is None:
        return None
    return "hypervisor" in match.group(1).split()


def _dmi_hypervisor(dmi: Dict[str, str]) -> str:
    if dmi.get("sys_vendor") == _MICROSOFT_VM[0] and dmi.get("product_name") == _MICROSOFT_VM[1]:
        return "microsoft"
    for key in ("sys_vendor", "product_name", "board_vendor", "bios_vendor"):
        value = dmi.get(key, "")
        for prefix, name in _DMI_VENDORS:
            if value.startswith(prefix):
                return name
    return ""


def identify(dmi: Dict[str, str], cpu_hypervisor_flag: Optional[bool], hypervisor_type: Optional[str]) -> HostIdentity:
    """The verdict from what was read (pure: the parse step of `read_host`).

    DMI names the hypervisor; the CPU flag and /sys/hypervisor/type say whether there is one.
    An EC2 bare-metal instance still says `Amazon EC2` in DMI but has no `hypervisor` flag: the
    flag wins where it was read."""
    dmi = {key: dmi.get(key) or "" for key in DMI_FIELDS}
    by_dmi = _dmi_hypervisor(dmi)
    xen = (hypervisor_type or "").strip().lower()
    if cpu_hypervisor_flag:
        name = by_dmi or ("xen" if xen == "xen" else "unknown")
        return HostIdentity(dmi, name, "vm", f"the CPU reports the hypervisor flag; DMI: {_dmi_text(dmi)}")
    if xen:
        return HostIdentity(dmi, xen, "vm", f"/sys/hypervisor/type is {xen}")
    if cpu_hypervisor_flag is False:
        return HostIdentity(dmi, "", "none", f"the CPU reports no hypervisor flag; DMI: {_dmi_text(dmi)}")
    if by_dmi:  # no cpuinfo flags line (not x86): DMI is all there is
        return HostIdentity(dmi, by_dmi, "vm", f"DMI names a hypervisor: {_dmi_text(dmi)}")
    if any(dmi.values()):
        return HostIdentity(dmi, "", "none", f"DMI names no hypervisor: {_dmi_text(dmi)}")
    return HostIdentity(dmi, "", "unknown", "neither DMI nor the CPU flags could be read")


def _dmi_text(dmi: Dict[str, str]) -> str:
    shown = [dmi[k] for k in ("sys_vendor", "product_name") if dmi.get(k)]
    return " ".join(shown) if shown else "not readable"


def _read_head(path: str, limit: int) -> Optional[str]:
    """The start of a file: the first CPU's block of /proc/cpuinfo is all that is needed."""
    data = read_bytes(path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def read_host(roots: Roots) -> HostIdentity:
    dmi = {name: parse_identity(read_attr(roots.sys("class", "dmi", "id", name))) or "" for name in DMI_FIELDS}
    # The first processor's block ends well within 8 KiB (its flags line is about 1.5 KiB).
    flag = parse_cpuinfo_hypervisor(_read_head(roots.proc("cpuinfo"), 8192))
    hypervisor_type = read_attr(roots.sys("hypervisor", "type"))
    return identify(dmi, flag, hypervisor_type)
