"""Target Link Speed of links trained below their maximum, read by `storpath helper`.

Link Control 2 (PCIe Base Spec 7.5.3.19) lies past the first 64 bytes of config space, which
the kernel gives only to a reader with CAP_SYS_ADMIN. storpath.readers.pci reads it itself
when it may (the exporter run as root); a `storpath serve` that holds no capability asks the
helper for the function's first 256 bytes instead (its `pci-config` command,
storpath.base.privhelper), in a background pass: the scrape serves what the last pass read
and never waits for the helper.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from storpath.base import privhelper
from storpath.readers.pci import PciDevice, parse_target_link_speed

CONFIG_BYTES = 256  # the PCI Express capability with Link Control 2 lies within them


def wants_target(device: PciDevice) -> bool:
    """A link running below its own maximum whose target is not known (config space not read
    that far here), on a device that is awake: reading a sleeping one's config wakes it."""
    speed, most = device.current_link_speed, device.static.max_link_speed
    return (device.asleep is None and device.target_link_speed is None and speed is not None
            and most is not None and speed < most)


def read_targets(addresses: Iterable[str], timeout: float
                 ) -> Tuple[Dict[str, float], Dict[str, str]]:
    """(address -> Target Link Speed, address -> why the helper could not read it) for each of
    `addresses`, as the helper reads their config space. A reserved value or a short read is
    left out (unknown, never a guess), without a reason: nothing failed."""
    targets: Dict[str, float] = {}
    unknown: Dict[str, str] = {}
    for address in addresses:
        try:
            reply = privhelper.ask({"cmd": "pci-config", "address": address, "length": CONFIG_BYTES,
                                    "timeout": timeout}, timeout + 5.0)
            config: Optional[bytes] = privhelper.decode_output(reply.get("stdout"))
        except OSError as exc:
            unknown[address] = f"helper: {exc}"
            continue
        if config is not None and config[:4] == b"\xff\xff\xff\xff":
            unknown[address] = "config space read all-ones (the device did not answer)"
            continue
        target = parse_target_link_speed(config)
        if target is not None:  # (a reserved value or none: unknown, as the verdict takes it; nothing failed)
            targets[address] = target
    return targets, unknown


def fill_in(devices: List[PciDevice], targets: Dict[str, float]) -> None:
    """Give this scrape's devices the targets the last pass read, where they have none of their own."""
    for device in devices:
        if device.target_link_speed is None and device.address in targets and wants_target(device):
            device.target_link_speed = targets[device.address]
