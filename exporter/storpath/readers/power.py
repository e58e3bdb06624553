"""Whether a PCI function sleeps, read before anything that would wake it.

Reading a function's config space, or the link attributes the kernel makes from it
(current_link_speed, current_link_width, max_link_speed, max_link_width), resumes a
runtime-suspended function on kernels with "PCI/sysfs: Ensure devices are powered for
config reads" (2025, taken into the stable kernels): a monitor reading them every scrape
keeps an idle GPU or a drive in D3cold awake. On older kernels the same reads of a function
in D3cold give errors or all-ones ("Unknown", width 63), which are not a link.

Two attributes tell, neither of which touches the device:
- power/runtime_status (Documentation/ABI/testing/sysfs-devices-power): active, suspended,
  suspending, resuming, error or unsupported (runtime PM not enabled for it);
- power_state (Documentation/ABI/testing/sysfs-bus-pci, Linux 5.19 and later): D0, D1, D2,
  D3hot, D3cold or unknown, the state the kernel last put the function in.
A function is asleep when runtime PM says suspended or suspending, or when the kernel left it
in D3hot or D3cold (without runtime PM: a driver's or the firmware's doing). runtime_status
is read first and, where it says active, is all that is read: one small read per function.
"""

from __future__ import annotations

from typing import Optional

from storpath.base.parse import attribute_text
from storpath.base.sysfs import read_attr, read_bytes

# What a sleeping function must not have read (the kernel resumes it to answer, or in D3cold
# answers all-ones before the powered config reads); max_link_speed too: kernels before 6.13
# read it from config space.
WAKING_ATTRIBUTES = frozenset({"config", "current_link_speed", "current_link_width", "max_link_speed",
                               "max_link_width"})
ASLEEP_RUNTIME = frozenset({"suspended", "suspending"})
ASLEEP_STATES = frozenset({"D3hot", "D3cold"})
# What the runtime status says when it leaves the D state to tell.
UNSURE_RUNTIME = frozenset({"unsupported", "error"})

# What this reader reads (storpath capture takes these with the PCI tree's attributes).
CAPTURE_SYSFS = ("bus/pci/devices/*/{power_state,power/runtime_status,power/runtime_suspended_time}",)


def parse_sleep(runtime_status: Optional[str], power_state: Optional[str]) -> Optional[str]:
    """The state a function sleeps in ("D3cold", "D3hot", or "suspended" where power_state
    does not say), None when it is awake or nothing says otherwise. No I/O."""
    asleep_state = power_state if power_state in ASLEEP_STATES else None
    if runtime_status in ASLEEP_RUNTIME:
        return asleep_state or "suspended"
    return asleep_state


def read_sleep(path: str) -> Optional[str]:
    """parse_sleep of the function whose sysfs directory is `path`, reading no more than it
    needs: power_state only where runtime_status does not say active (asleep: to name the
    state; unsupported, error or absent: the D state is then the only word)."""
    raw = read_bytes(path + "/power/runtime_status")
    if raw == b"active\n":  # as the kernel prints it: most functions, every scrape
        return None
    runtime = attribute_text(raw)
    if runtime == "active":
        return None
    if runtime in ASLEEP_RUNTIME or runtime in UNSURE_RUNTIME or runtime is None:
        return parse_sleep(runtime, read_attr(path + "/power_state"))
    return None  # resuming: it is being woken by someone else already


def read_suspended_seconds(path: str) -> Optional[float]:
    """How long the function has spent runtime-suspended since boot
    (power/runtime_suspended_time, in milliseconds), None where the kernel does not say."""
    text = read_attr(path + "/power/runtime_suspended_time")
    try:
        return int(text) / 1000.0 if text is not None else None
    except ValueError:
        return None
