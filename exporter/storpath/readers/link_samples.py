"""The link as trained now, of a few PCI functions, read often: GPUs and accelerators lower
their link's speed (and, by NVIDIA's and AMD's own account, its width) while idle and raise
it when busy, so one reading per scrape says little. `collectors.gpu` samples them about
once a second between scrapes with this read: two small sysfs attributes per function
(current_link_speed, current_link_width: Documentation/ABI/testing/sysfs-bus-pci), after
power/runtime_status, so that a GPU that sleeps is never woken by its monitor."""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

from storpath.base.parse import parse_pcie_speed, parse_pcie_width
from storpath.base.sysfs import read_attr
from storpath.readers.power import read_sleep

Sample = Tuple[Optional[float], Optional[int]]  # (transfers per second, lanes); None: unreadable


def parse_sample(speed_text: Optional[str], width_text: Optional[str]) -> Sample:
    """One function's link from its two attributes' texts (None: not read). No I/O."""
    speed = parse_pcie_speed(speed_text)[0] if speed_text is not None else None
    width = parse_pcie_width(width_text, allow_zero=True)[0] if width_text is not None else None
    return speed, width


def read_samples(paths: Mapping[str, str]) -> Dict[str, Sample]:
    """address -> its link now, for each function's sysfs directory in `paths`. A function
    gone since (nothing readable) is left out; one unreadable attribute is None. A function
    that sleeps (storpath.readers.power) is left out too: reading its link would wake it."""
    out: Dict[str, Sample] = {}
    for address, path in paths.items():
        if read_sleep(path) is not None:
            continue
        speed_text = read_attr(path + "/current_link_speed")
        width_text = read_attr(path + "/current_link_width")
        if speed_text is None and width_text is None:
            continue
        out[address] = parse_sample(speed_text, width_text)
    return out
