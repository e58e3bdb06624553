"""Which link numbers are hardware, and which a hypervisor made up.

In a virtual machine the PCIe ports the guest sees are emulated: QEMU's `pcie-root-port`
reports whatever link its machine type chose (2.5 GT/s x1 on older q35 machine types,
16 GT/s x32 on newer ones, or `x-speed`/`x-width`), VMware's root ports likewise. A device
passed through to the guest keeps its own registers, so its own Link Capabilities and Link
Status still tell the truth about its physical link, while the host's port it is plugged
into is not visible from the VM at all. A device passed through onto the root bus becomes a
root-complex integrated endpoint (or an endpoint with no port above it: Hyper-V's and Xen's
pass-through, cloud instances' NVMe), whose link registers read zero: there is no link to
judge.

So, per end of a link:
- a device end whose port is emulated (or whose port claims fewer lanes than the device is
  running at now, which no real link can do) is judged against its own capability only:
  a real downgrade its own registers show (Gen4 x4 drive with Link Status x2) stays visible,
  but whether its slot on the host could do better cannot be known (`device_only`);
- an emulated device, an emulated port, and a device end with no port above it have nothing
  storpath can verify (`none`);
- everything else rests on the registers of both ends (`both_ends`): bare metal.

Pure functions over the PCI records; `storpath.analysis.pcie` calls `link_trust()` when it
builds the expectations.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from storpath.base.records import datarecord
from storpath.analysis.expectation import (BOTH_ENDS, DEVICE_ONLY, EMULATED_DEVICE, EMULATED_PORT, ENDS_DISAGREE,
                                           NO_PARTNER, NONE)
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice

# PCI vendor ids that belong to a hypervisor's emulated hardware: nothing with these ids is
# silicon on a PCIe link. Red Hat's QEMU range (1b36: pcie-root-port 000c, pcie-pci-bridge 000e,
# pxb-pcie 000b, nvme 0010) and virtio (1af4), VMware (15ad: PCI Express root port 07a0, PCI
# bridge 0790, vNVMe 07f0, PVSCSI 07c0, vmxnet3 07b0), Microsoft Hyper-V (1414), XenSource's
# platform device (5853), VirtualBox (80ee), Parallels (1ab8).
HYPERVISOR_VENDORS = {
    "0x1b36": "QEMU",
    "0x1af4": "virtio",
    "0x15ad": "VMware",
    "0x1414": "Hyper-V",
    "0x5853": "Xen",
    "0x80ee": "VirtualBox",
    "0x1ab8": "Parallels",
}
# Emulated bridges that borrow the ids of real chips: QEMU's ioh3420 root port (Intel 5520 IOH
# root port) and its x3130-upstream / xio3130-downstream switch (TI XIO3130). Emulated only
# when the host is a virtual machine.
BORROWED_IDS = {("0x8086", "0x3420"), ("0x104c", "0x8232"), ("0x104c", "0x8233")}



@datarecord(frozen=True)
class LinkTrust:
    """What a verdict on one end's link can rest on."""

    basis: str  # both_ends | device_only | none
    reason: str  # "" | emulated_port | emulated_device | ends_disagree | no_partner
    use_partner: bool  # the partner's capability counts in the expectation

    @property
    def verifiable(self) -> bool:
        return self.basis == BOTH_ENDS


def emulated(device: PciDevice, guest: bool) -> Optional[str]:
    """The hypervisor whose invention this function is, or None for hardware (or a device
    passed through to the guest). In a guest every PCIe port is the hypervisor's: the host's
    ports are never passed through."""
    static = device.static
    vendor = HYPERVISOR_VENDORS.get(static.vendor_id or "")
    if vendor:
        return vendor
    if guest and ((static.vendor_id, static.device_id) in BORROWED_IDS
                  or device.port_type in DOWNSTREAM_FACING or device.port_type == "upstream_port"):
        return "hypervisor"
    return None


def ends_disagree(device: PciDevice, port: PciDevice) -> bool:
    """The device runs wider than its port's maximum: no real link does that, so the port's
    numbers are not hardware. A link faster than the port's max_link_speed is not such a sign:
    kernels 6.13 and later write a port's Link Capabilities speed there, which some real ports
    state below the speeds they support and run at (analysis.pcie.speed_capability)."""
    width, port_width = device.current_link_width, port.static.max_link_width
    return width is not None and width > 0 and port_width is not None and width > port_width


def link_trust(devices: List[PciDevice], partners: Dict[str, Optional[PciDevice]], guest: bool) -> Dict[str, LinkTrust]:
    """LinkTrust of every device with a link; `partners` is the other end of each (pcie.link_partner)."""
    trust: Dict[str, LinkTrust] = {}
    for device in devices:
        if device.address not in partners:
            continue
        partner = partners[device.address]
        if partner is None:
            trust[device.address] = LinkTrust(NONE, NO_PARTNER, False)
            continue
        faces_down = device.port_type in DOWNSTREAM_FACING
        port, end = (device, partner) if faces_down else (partner, device)
        if emulated(end, guest):
            basis, reason = NONE, EMULATED_DEVICE
        elif emulated(port, guest):
            basis, reason = DEVICE_ONLY, EMULATED_PORT
        elif ends_disagree(end, port):
            basis, reason = DEVICE_ONLY, ENDS_DISAGREE
        else:
            basis, reason = BOTH_ENDS, ""
        if faces_down and basis != BOTH_ENDS:
            # The port end of a link whose port numbers are not hardware: nothing to say.
            trust[device.address] = LinkTrust(NONE, reason, True)
        else:
            trust[device.address] = LinkTrust(basis, reason, basis == BOTH_ENDS)
    return trust


REASON_TEXT = {
    EMULATED_PORT: "the port above it is emulated by the hypervisor; the host's port is not visible from a VM",
    EMULATED_DEVICE: "the device is emulated by the hypervisor: its link is not hardware",
    ENDS_DISAGREE: "the device runs wider than its port's maximum, which no real link does: "
                     "the port's numbers are not hardware",
    NO_PARTNER: "nothing at the other end of the link to compare with (an empty slot, a root-complex "
                  "integrated endpoint, a device passed through onto the root bus): no link to judge",
}
