"""What machine this is (DMI) and whether it is a virtual machine."""

from __future__ import annotations

from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.host import DMI_FIELDS

HOST_INFO = Family(
    "storpath_host_info", GAUGE,
    "The machine's DMI identity (sys_vendor and product_name: its model, the board's where the product name is a "
    "firmware placeholder) and whether it is a virtual machine (`virtualization` vm, none or unknown; `hypervisor` "
    "as systemd-detect-virt names it); always 1.", (*DMI_FIELDS, "hypervisor", "virtualization"),
    doc="always 1. `virtualization` is `vm` (the CPU reports the hypervisor flag, `/sys/hypervisor/type` exists, "
        "or, without CPU flags, DMI names a hypervisor), `none` (bare metal) or `unknown` (nothing readable); "
        "`hypervisor` as `systemd-detect-virt` names it (`kvm`, `qemu`, `vmware`, `microsoft`, `xen`, `oracle`, "
        "`amazon`, `google`, ...; `unknown` when only the CPU flag says so), empty on bare metal. Rules that need "
        "bare metal exclude `storpath_host_info{virtualization=\"vm\"}`. `sys_vendor` and `product_name` name the "
        "model that hosts of one build share: DMI's, or the board's (`board_vendor`, `board_name`) where firmware left "
        "a placeholder product name (`System Product Name` on ASUS desktop boards, `Super Server` on Supermicro, "
        "`To Be Filled By O.E.M.`); `product_name` is empty where the board name is a placeholder too, and such "
        "hosts are compared with no model")

FAMILIES = (HOST_INFO,)


@register("host", default=True)
class HostCollector(Collector):
    """DMI identity of the machine and whether it is a virtual machine (which hypervisor)."""

    families = FAMILIES
    reads = ("host",)

    def values(self, snapshot) -> Rows:
        host = snapshot.host
        rows = Rows()
        # sys_vendor and product_name carry the model (readers.host.HostIdentity.model): DMI's
        # own, or the board's where firmware left the product name a placeholder.
        vendor, product = host.model
        shown = {**host.dmi, "sys_vendor": vendor, "product_name": product}
        rows.add(HOST_INFO, tuple(shown[k] for k in DMI_FIELDS) + (host.hypervisor, host.virtualization), 1)
        return rows
