"""The machine itself: what it is (DMI) and, in a virtual machine, what storpath cannot know
from inside it (the same verdict the `host` and `pcie` collectors export as
storpath_host_info and storpath_pcie_link_verifiable)."""

from __future__ import annotations

from storpath.analysis.expectation import DEVICE_ONLY, NONE
from storpath.report.findings import INFO, Facts, Finding, Outcome, register


@register("host", collector="host", order=5)
def check(facts: Facts, out: Outcome) -> None:
    host = facts.host()
    name = " ".join(v for v in (host.dmi["sys_vendor"], host.dmi["product_name"]) if v) or "unknown machine"
    facts.add_label("host", name)
    if not host.virtual:
        return
    links = facts.pcie_links()
    own = sorted(a for a, link in links.items() if link.speed.basis == DEVICE_ONLY and link.partner)
    unjudged = sorted(a for a, link in links.items()
                      if link.speed.basis == NONE and link.partner is None and not link.faces_downstream)
    parts = []
    if own:
        parts.append(f"{len(own)} passed-through device(s) judged against their own link capability only "
                     f"({', '.join(own)})")
    if unjudged:
        parts.append(f"{len(unjudged)} device(s) with no port above them, no link to judge ({', '.join(unjudged)})")
    out.add(Finding(
        subject="host", severity=INFO, kind="host.virtual_machine",
        title=f"a virtual machine ({host.hypervisor}): the host's PCIe ports and NUMA placement are not visible",
        evidence=f"{host.evidence}" + ("; " + "; ".join(parts) if parts else ""),
        impact="emulated ports report whatever link their hypervisor chose, so whether a drive's slot on the "
               "host could do better cannot be known from here; a real downgrade a passed-through device's own "
               "registers show is still reported",
        remedy="Run storpath on the hypervisor host (or `storpath check` there) to judge the physical slots "
               "and NUMA placement."))
