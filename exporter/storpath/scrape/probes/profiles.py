"""Probe profiles: the fio job options a profile may set, checked when the config is loaded.

A profile is refused at load when it names a write workload or any option that writes
(verify, trim, fill_device, exec_prerun, write_iolog ...), and only options from an
allow-list reach fio. fio also always gets --readonly and --direct=1 (probes.fio).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.config import ConfigError, shown_key
from storpath.base.log import describe
from storpath.base.units import parse_size

# Throughput saturates from about 32 KiB per request on NVMe drives: below that a probe
# measures IOPS, and comparing it with a link's bandwidth says nothing.
PATH_EXPECTATION_MIN_BLOCK = 32 * 1024


@datarecord(frozen=True)
class Profile:
    """One probe profile: its read-only fio options and what its result is compared with."""

    name: str
    options: Tuple[Tuple[str, str], ...]  # fio job options in order, values as fio reads them
    block_bytes: Optional[int]  # the read size, None when it varies (bssplit)
    path_expectation: bool  # compare with the bandwidth the PCIe path allows
    builtin: bool = False

    def option(self, key: str) -> Optional[str]:
        for name, value in self.options:
            if name == key:
                return value
        return None

    @property
    def jobs(self) -> int:
        """fio jobs one run starts (numjobs): each reads up to io_size on its own."""
        return int(self.option("numjobs") or 1)


BUILTIN_PROFILES: Dict[str, Profile] = {
    "seqread": Profile("seqread", (("rw", "read"), ("bs", "1M"), ("iodepth", "16")), 1 << 20, True, True),
    "randread": Profile("randread", (("rw", "randread"), ("bs", "4k"), ("iodepth", "32")), 4096, False, True),
}
DEFAULT_PROFILES = ("seqread", "randread")


READ_WORKLOADS = ("read", "randread")

# The patterns below are kept as text and compiled by `re` when a profile is first checked:
# `storpath serve` imports this module whether or not the config names a profile, and
# compiling them all at import cost about a tenth of that import's regular expressions.

# Anything that writes, trims, deletes, runs commands or writes files beside the probe.
# These get their own message; every other option outside the allow-list is refused too.
_WRITE_OPTIONS = (
    r"^(verify.*|do_verify|experimental_verify|trim.*|rwmix.*|fill_device|fill_fs|overwrite|create_.*|fallocate|"
    r"unlink.*|zonemode|zone_reset.*|allow_mounted_write|fsync.*|fdatasync|end_fsync|sync|sync_file_range|write_.*|"
    r"buffer_pattern|zero_buffers|refill_buffers|scramble_buffers|dedupe_.*|buffer_compress_.*|compress_.*|"
    r"exec_prerun|exec_postrun|ioscheduler|file_append|replay_.*|read_iolog|log_.*|per_job_logs|"
    r"readonly|direct|buffered|filename|filename_format|directory|opendir|nrfiles|unique_filename|"
    r"lockfile|pre_read|allow_file_create)$")

_SIZE_VALUE = r"^[0-9]+(\.[0-9]+)?[kKmMgGtT]?[iI]?[bB]?$"
_BSSPLIT = r"^([0-9]+[kKmM]?/[0-9]*:?)+$"
_SIZE_OR_PERCENT = r"^([0-9]+(\.[0-9]+)?[kKmMgGtT]?[iI]?[bB]?|[0-9]{1,3}%)$"
_DURATION_VALUE = r"^[0-9]+(ms|s|m)?$"
_CPU_LIST = r"^[0-9,\-]+$"
_DISTRIBUTION = r"^(random|zipf:[0-9.]+|pareto:[0-9.]+|normal:[0-9.]+|gauss:[0-9.]+)$"


def _one_of(*allowed: str):
    def check(value: str) -> Optional[str]:
        return None if value in allowed else f"expected one of {', '.join(allowed)}"
    return check


def _matches(pattern: str, what: str):
    def check(value: str) -> Optional[str]:
        return None if re.fullmatch(pattern, value) else f"expected {what}"
    return check


def _int_range(low: int, high: int):
    def check(value: str) -> Optional[str]:
        if not (value.isascii() and value.isdigit() and len(value) <= 12) or not low <= int(value) <= high:
            return f"expected a whole number from {low} to {high}"
        return None
    return check


_BOOL = _one_of("0", "1")

# fio job options a profile may set, each with a check of its value. Anything else is refused.
ALLOWED_OPTIONS = {
    "rw": _one_of(*READ_WORKLOADS),
    "bs": _matches(_SIZE_VALUE, "a block size such as 4k or 1M"),
    "bssplit": _matches(_BSSPLIT, "a split such as 4k/50:64k/50"),
    "blockalign": _matches(_SIZE_VALUE, "a size such as 4k"),
    "iodepth": _int_range(1, 4096),
    "iodepth_batch_submit": _int_range(0, 4096),
    "iodepth_batch_complete_min": _int_range(0, 4096),
    "iodepth_batch_complete_max": _int_range(0, 4096),
    "iodepth_low": _int_range(0, 4096),
    "numjobs": _int_range(1, 64),
    "ioengine": _one_of("libaio", "io_uring", "psync", "pvsync", "pvsync2", "sync", "posixaio"),
    "hipri": _BOOL,
    "fixedbufs": _BOOL,
    "registerfiles": _BOOL,
    "offset": _matches(_SIZE_OR_PERCENT, "a size or a percentage"),
    "offset_increment": _matches(_SIZE_OR_PERCENT, "a size or a percentage"),
    "size": _matches(_SIZE_OR_PERCENT, "a size or a percentage"),
    "random_distribution": _matches(_DISTRIBUTION, "random, zipf:N, pareto:N, normal:N or gauss:N"),
    "norandommap": _BOOL,
    "randrepeat": _BOOL,
    "rate": _matches(_SIZE_VALUE, "a rate in bytes per second such as 500m"),
    "rate_iops": _int_range(1, 100_000_000),
    "ramp_time": _matches(_DURATION_VALUE, "a duration such as 2s"),
    "cpus_allowed": _matches(_CPU_LIST, "a CPU list such as 0-3,8"),
    "cpus_allowed_policy": _one_of("shared", "split"),
    "numa_cpu_nodes": _matches(_CPU_LIST, "a node list such as 0 or 0-1"),
    "invalidate": _BOOL,
}
_ALIASES = {"readwrite": "rw", "blocksize": "bs", "blocksize_split": "bssplit", "ba": "blockalign",
            "iodepth_batch": "iodepth_batch_submit"}


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value).strip()


def check_profile(name: str, raw: Any) -> Profile:
    where = f"probes.profiles.{shown_key(name)}"
    if name in BUILTIN_PROFILES:
        raise ConfigError(f"{where}: {describe(name)} is a built-in profile; give yours another name")
    if not re.fullmatch(r"[a-zA-Z0-9_.-]{1,64}", name):
        raise ConfigError(f"{where}: a profile name is 1 to 64 letters, digits, '_', '.' and '-'")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of fio options, e.g. {{rw: read, bs: 128k, iodepth: 32}}")
    options: List[Tuple[str, str]] = []
    path_expectation: Optional[bool] = None
    for key, value in raw.items():
        key = shown_key(str(key))  # as messages show it: a key that is no plain name is no fio option
        if key == "expect_path_bandwidth":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}.expect_path_bandwidth: expected true or false")
            path_expectation = value
            continue
        option = _ALIASES.get(key, key)
        text = _option_text(value)
        if option == "rw" and text not in READ_WORKLOADS:
            raise ConfigError(f"{where}.{key}: {describe(text)} is not a read workload; probes only ever read "
                              f"(allowed: {', '.join(READ_WORKLOADS)})")
        if re.match(_WRITE_OPTIONS, option):
            raise ConfigError(f"{where}.{key}: fio option {describe(key)} is refused: probes only ever read, with the "
                              f"target and direct I/O set by storpath")
        check = ALLOWED_OPTIONS.get(option)
        if check is None:
            raise ConfigError(f"{where}.{key}: fio option {describe(key)} is not allowed in a probe profile "
                              f"(allowed: {', '.join(sorted(ALLOWED_OPTIONS))})")
        problem = check(text)
        if problem:
            raise ConfigError(f"{where}.{key}: {describe(text)}: {problem}")
        if any(existing == option for existing, _ in options):
            raise ConfigError(f"{where}.{key}: option {describe(option)} given twice")
        options.append((option, text))
    keys = {k for k, _ in options}
    if "rw" not in keys:
        raise ConfigError(f"{where}: set rw (read or randread)")
    block: Optional[int] = 4096
    if "bssplit" in keys:
        block = None
    elif "bs" in keys:
        try:
            block = parse_size(dict(options)["bs"])
        except ValueError as exc:
            raise ConfigError(f"{where}.bs: {exc}") from None
    if path_expectation is None:
        path_expectation = block is not None and block >= PATH_EXPECTATION_MIN_BLOCK
    return Profile(name=name, options=tuple(options), block_bytes=block, path_expectation=path_expectation)
