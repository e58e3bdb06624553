"""Whether libata holds a SATA link below what its controller allows."""

from __future__ import annotations

from storpath.readers.ata import AtaLink


def speed_limited(link: AtaLink) -> bool:
    """True when the kernel's current limit (sata_spd_limit) is below the controller's
    (hw_sata_spd_limit). A limit of None means "no limit" (the kernel's all-speeds mask
    reads `<unknown>`), so a set limit under an unset hardware limit is a lowered one:
    that is what libata's error handling does after link errors. `libata.force` lowers
    both limits alike and so reads as not limited: it is a decision, not a fault."""
    if link.limit is None:
        return False
    if link.hardware_limit is None:
        return True
    return link.limit < link.hardware_limit
