"""The PCIe bandwidth controller's thermal cooling devices (Linux 6.13 and later,
drivers/pci/pcie/bwctrl.c): one per downstream port it manages, under
/sys/class/thermal/cooling_deviceN/ with `type` "PCIe_Port_Link_Speed_<port address>".

Attributes (Documentation/ABI/testing/sysfs-class-thermal): cur_state and max_state (integers;
state 0 is the port's own highest speed, each state above it one speed lower), stats/total_trans
(transitions since boot or the last reset), stats/time_in_state_ms ("stateN <ms>" per line).

cur_state alone does not say the link was throttled: it counts down from the port's maximum, so
a Gen3 drive below a Gen5 port reads 2 with nothing changed. Only the statistics show that the
cooling device changed the state (a transition, or time spent in a state other than the current).

Read only when a port's Target Link Speed is below a link end's capability: on a host with no
capped link nothing here is read.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int
from storpath.base.roots import Roots
from storpath.base.sysfs import list_entries, read_attr

TYPE_PREFIX = "PCIe_Port_Link_Speed_"

# What this reader reads (storpath capture takes these; see report/capture/files.py).
CAPTURE_SYSFS = (
    "class/thermal/cooling_device*",
    "class/thermal/cooling_device*/{type,cur_state,max_state}",
    "class/thermal/cooling_device*/stats/{total_trans,time_in_state_ms}",
)


@datarecord(frozen=True)
class LinkCooling:
    """One downstream port's bandwidth cooling device: its state and statistics."""

    port: str  # PCI address of the downstream port
    cur_state: Optional[int]
    max_state: Optional[int]
    total_trans: Optional[int]  # None: no stats/ (CONFIG_THERMAL_STATISTICS off)
    time_in_state_ms: Tuple[Tuple[int, int], ...]  # (state, milliseconds)

    @property
    def changed(self) -> bool:
        """The cooling device moved the link's speed at least once (its statistics say so)."""
        if self.total_trans:
            return True
        return any(ms > 0 and state != self.cur_state for state, ms in self.time_in_state_ms)


def parse_time_in_state(text: Optional[str]) -> Tuple[Tuple[int, int], ...]:
    """"state0 1234" lines (sysfs-class-thermal, stats/time_in_state_ms); bad lines left out."""
    out: List[Tuple[int, int]] = []
    for line in (text or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if not name.startswith("state"):
            continue
        state, ms = parse_int(name[5:], minimum=0), parse_int(value.strip(), minimum=0)
        if state is not None and ms is not None:
            out.append((state, ms))
    return tuple(out)


def read_link_cooling(roots: Roots) -> Dict[str, LinkCooling]:
    """Port address -> its bandwidth controller cooling device."""
    base = roots.sys("class", "thermal")
    out: Dict[str, LinkCooling] = {}
    for name, _ in list_entries(base):
        if not name.startswith("cooling_device"):
            continue
        at = os.path.join(base, name)
        kind = read_attr(os.path.join(at, "type"))
        if not kind or not kind.startswith(TYPE_PREFIX):
            continue
        port = kind[len(TYPE_PREFIX):]
        out[port] = LinkCooling(
            port=port,
            cur_state=parse_int(read_attr(os.path.join(at, "cur_state")), minimum=0),
            max_state=parse_int(read_attr(os.path.join(at, "max_state")), minimum=0),
            total_trans=parse_int(read_attr(os.path.join(at, "stats", "total_trans")), minimum=0),
            time_in_state_ms=parse_time_in_state(read_attr(os.path.join(at, "stats", "time_in_state_ms"))),
        )
    return out


def attach_link_cooling(roots: Roots, devices) -> None:
    """Sets `link_cooling` on the ports whose Target Link Speed is below their own maximum,
    reading the cooling devices only when there is such a port."""
    capped = [d for d in devices if d.target_link_speed is not None and d.static.max_link_speed is not None
              and d.target_link_speed < d.static.max_link_speed]
    if not capped:
        return
    cooling = read_link_cooling(roots)
    for device in capped:
        device.link_cooling = cooling.get(device.address)
