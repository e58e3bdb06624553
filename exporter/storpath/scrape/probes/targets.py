"""Probe targets: a block device, or a file storpath creates once; checked when the config
is loaded, and a file target's place checked again before every probe.

A file target never lies under /dev, /sys or /proc, judged on its real path (a symlinked
folder does not walk around the check), and its size is bounded: a probe file must not
fill the filesystem it measures.
"""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any, Dict, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.config import ConfigError, check_size
from storpath.base.log import describe
from storpath.scrape.probes.profiles import DEFAULT_PROFILES, Profile
from storpath.base.units import parse_rate

# The largest file target storpath creates: a probe reads for seconds, and a file of a
# few GiB already holds more than a run at the budget reads without wrapping around.
MAX_FILE_SIZE = 64 << 30
_PSEUDO_FILESYSTEMS = ("/dev", "/sys", "/proc")


@datarecord(frozen=True)
class Target:
    """One probe target, a block device or a file: the profiles it runs and what is expected of it."""

    name: str  # the `target` label
    kind: str  # "device" (a block device node) or "file" (a regular file storpath creates once)
    path: str
    profiles: Tuple[str, ...]
    expected: Mapping[str, float] = field(default_factory=dict)  # profile -> configured bytes/s
    expected_all: Optional[float] = None  # one configured value for the large-block profiles
    device_name: Optional[str] = None  # kernel device override (a file on ZFS has no block device)
    file_size: Optional[int] = None


_TARGET_KEYS = ("device", "file", "name", "profiles", "expected_read_bytes_per_second", "device_name", "file_size")


def pseudo_filesystem_problem(path: str) -> Optional[str]:
    """Why a file target at `path` is refused, after resolving every symlink on the way:
    under /dev, /sys or /proc it would be a device node or a kernel file, not a file on
    a filesystem."""
    real = os.path.realpath(path)
    for top in _PSEUDO_FILESYSTEMS:
        if real == top or real.startswith(top + "/"):
            shown = path if real == path else f"{path} (really {real})"
            return (f"{shown} is under /dev, /sys or /proc: a file target must be a regular file on a filesystem "
                    f"(use `device:` for a block device)")
    return None


def _path_problem(path: str) -> Optional[str]:
    """What fio cannot be given: it strips a value's trailing blanks, and a control
    character has no place in a path an operator typed."""
    if path != path.rstrip() or any(ord(c) < 0x20 or c == "\x7f" for c in path):
        return f"{describe(path)} ends in a blank or holds a control character"
    return None


def check_target(raw: Any, profiles: Mapping[str, Profile], where: str = "probes.targets[0]") -> Target:
    if isinstance(raw, str):
        raw = {"device": raw} if raw.startswith("/dev/") else {"file": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with `device: /dev/...` or `file: /path`")
    for key in raw:
        if key not in _TARGET_KEYS:
            raise ConfigError(f"{where}: unknown key {describe(key)} (known: {', '.join(_TARGET_KEYS)})")
    if ("device" in raw) == ("file" in raw):
        raise ConfigError(f"{where}: give exactly one of `device` (a block device) or `file` (a file storpath creates)")
    kind = "device" if "device" in raw else "file"
    path = raw[kind]
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ConfigError(f"{where}.{kind}: expected an absolute path, got {describe(path)}")
    problem = _path_problem(path)
    if problem:
        raise ConfigError(f"{where}.{kind}: {problem}")
    path = os.path.normpath(path)
    if kind == "file":
        problem = pseudo_filesystem_problem(path)
        if problem:
            raise ConfigError(f"{where}.file: {problem}")
        if os.path.exists(path) and not os.path.isfile(path):
            raise ConfigError(f"{where}.file: {path} exists and is not a regular file (a file target is never a "
                              f"device node; use `device:` for a block device)")
    name = raw.get("name", path)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: expected a non-empty string")
    chosen = raw.get("profiles", list(DEFAULT_PROFILES))
    if isinstance(chosen, str):
        chosen = [chosen]
    if not isinstance(chosen, list) or not chosen:
        raise ConfigError(f"{where}.profiles: expected a list of profile names")
    for profile in chosen:
        if not isinstance(profile, str) or profile not in profiles:
            raise ConfigError(f"{where}.profiles: unknown profile {describe(profile)} "
                              f"(known: {', '.join(sorted(profiles))})")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{where}.profiles: a profile is listed twice")
    expected: Dict[str, float] = {}
    expected_all = None
    raw_expected = raw.get("expected_read_bytes_per_second")
    try:
        if isinstance(raw_expected, dict):
            for profile, value in raw_expected.items():
                if profile not in chosen:
                    raise ConfigError(f"{where}.expected_read_bytes_per_second: profile {describe(profile)} is not "
                                      f"probed on this target (probed: {', '.join(chosen)})")
                expected[profile] = parse_rate(value)
        elif raw_expected is not None:
            expected_all = parse_rate(raw_expected)
    except ValueError as exc:
        raise ConfigError(f"{where}.expected_read_bytes_per_second: {exc}") from None
    device_name = raw.get("device_name")
    if device_name is not None and (not isinstance(device_name, str) or "/" in device_name or not device_name):
        raise ConfigError(f"{where}.device_name: expected a kernel block device name such as nvme0n1 or md0")
    file_size = None
    if "file_size" in raw:
        if kind != "file":
            raise ConfigError(f"{where}.file_size: only a file target has a size to choose")
        file_size = check_size(f"{where}.file_size", raw["file_size"], MAX_FILE_SIZE)
    return Target(name=name, kind=kind, path=path, profiles=tuple(chosen), expected=expected,
                  expected_all=expected_all, device_name=device_name, file_size=file_size)
