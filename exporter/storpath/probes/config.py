"""The `probes:` section of the config file, checked when the config is loaded.

    probes:
      runtime: 5s                  # how long each fio run reads
      interval: 1h                 # time between two runs of a target's profiles
      jitter: 10m                  # random extra delay, so a fleet does not probe at once
      timeout: 35s                 # hard limit per fio run (default: runtime + 30 s)
      io_budget_per_hour: 100GiB   # bytes read per device per hour, all probes together
      busy_threshold: 0.5          # skip when the device was busy this fraction of busy_sample
      busy_sample: 1s
      file_size: 1GiB              # size of a file target when storpath creates it
      io_priority: idle            # idle | best-effort (fio --prioclass 3 or 2)
      fio: fio                     # fio binary (name on PATH or absolute path)
      state_file: ""               # default: $STATE_DIRECTORY/probes.json or /var/lib/storpath/probes.json
      profiles:                    # user profiles; seqread and randread are built in
        seq128k: {rw: read, bs: 128k, iodepth: 32}
      targets:
        - device: /dev/md0
          expected_read_bytes_per_second: 28GB/s
        - file: /tank/data/.storpath-probe
          profiles: [seqread]

Safety first: a profile is refused at load when it names a write workload or any option
that writes (verify, trim, fill_device, exec_prerun, write_iolog ...), and only options
from an allow-list reach fio. fio also always gets --readonly and --direct=1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from storpath.config import SECTION_VALIDATORS, ConfigError
from storpath.units import parse_duration, parse_size

# Throughput saturates from about 32 KiB per request on NVMe drives: below that a probe
# measures IOPS, and comparing it with a link's bandwidth says nothing.
PATH_EXPECTATION_MIN_BLOCK = 32 * 1024


@dataclass(frozen=True)
class Profile:
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


BUILTIN_PROFILES: Dict[str, Profile] = {
    "seqread": Profile("seqread", (("rw", "read"), ("bs", "1M"), ("iodepth", "16")), 1 << 20, True, True),
    "randread": Profile("randread", (("rw", "randread"), ("bs", "4k"), ("iodepth", "32")), 4096, False, True),
}
DEFAULT_PROFILES = ("seqread", "randread")


@dataclass(frozen=True)
class Target:
    name: str  # the `target` label
    kind: str  # "device" (a block device node) or "file" (a regular file storpath creates once)
    path: str
    profiles: Tuple[str, ...]
    expected: Mapping[str, float] = field(default_factory=dict)  # profile -> configured bytes/s
    expected_all: Optional[float] = None  # one configured value for the large-block profiles
    device_name: Optional[str] = None  # kernel device override (a file on ZFS has no block device)
    file_size: Optional[int] = None


@dataclass(frozen=True)
class ProbesConfig:
    targets: Tuple[Target, ...] = ()
    profiles: Mapping[str, Profile] = field(default_factory=lambda: dict(BUILTIN_PROFILES))
    runtime: float = 5.0
    interval: float = 3600.0
    jitter: float = 600.0
    timeout: Optional[float] = None
    io_budget_per_hour: int = 100 << 30
    busy_threshold: Optional[float] = 0.5
    busy_sample: float = 1.0
    file_size: int = 1 << 30
    io_priority: str = "idle"
    fio: str = "fio"
    state_file: str = ""

    @property
    def hard_timeout(self) -> float:
        return self.timeout if self.timeout is not None else self.runtime + 30.0

    def expected_for(self, target: Target, profile: str) -> Optional[float]:
        """The configured expectation of `target` under `profile`, if any."""
        if profile in target.expected:
            return target.expected[profile]
        prof = self.profiles.get(profile)
        if target.expected_all is not None and prof is not None and prof.path_expectation:
            return target.expected_all
        return None

    def target(self, key: str) -> Optional[Target]:
        for target in self.targets:
            if key in (target.name, target.path):
                return target
        return None


def default_state_file() -> str:
    """systemd's StateDirectory= sets $STATE_DIRECTORY (a colon-separated list)."""
    state_dir = os.environ.get("STATE_DIRECTORY", "").split(":")[0] or "/var/lib/storpath"
    return os.path.join(state_dir, "probes.json")


# ---- fio options -----------------------------------------------------------------

READ_WORKLOADS = ("read", "randread")

# Anything that writes, trims, deletes, runs commands or writes files beside the probe.
# These get their own message; every other option outside the allow-list is refused too.
_WRITE_OPTIONS = re.compile(
    r"^(verify.*|do_verify|experimental_verify|trim.*|rwmix.*|fill_device|fill_fs|overwrite|create_.*|fallocate|"
    r"unlink.*|zonemode|zone_reset.*|allow_mounted_write|fsync.*|fdatasync|end_fsync|sync|sync_file_range|write_.*|"
    r"buffer_pattern|zero_buffers|refill_buffers|scramble_buffers|dedupe_.*|buffer_compress_.*|compress_.*|"
    r"exec_prerun|exec_postrun|ioscheduler|file_append|replay_.*|read_iolog|log_.*|per_job_logs|"
    r"readonly|direct|buffered|filename|filename_format|directory|opendir|nrfiles|unique_filename|"
    r"lockfile|pre_read|allow_file_create)$")

_SIZE_VALUE = re.compile(r"^\d+(\.\d+)?[kKmMgGtT]?[iI]?[bB]?$")
_BSSPLIT = re.compile(r"^(\d+[kKmM]?/\d*:?)+$")
_SIZE_OR_PERCENT = re.compile(r"^(\d+(\.\d+)?[kKmMgGtT]?[iI]?[bB]?|\d{1,3}%)$")
_DURATION_VALUE = re.compile(r"^\d+(ms|s|m)?$")
_CPU_LIST = re.compile(r"^[0-9,\-]+$")
_DISTRIBUTION = re.compile(r"^(random|zipf:[0-9.]+|pareto:[0-9.]+|normal:[0-9.]+|gauss:[0-9.]+)$")


def _one_of(*allowed: str):
    def check(value: str) -> Optional[str]:
        return None if value in allowed else f"expected one of {', '.join(allowed)}"
    return check


def _matches(pattern, what: str):
    def check(value: str) -> Optional[str]:
        return None if pattern.match(value) else f"expected {what}"
    return check


def _int_range(low: int, high: int):
    def check(value: str) -> Optional[str]:
        if not value.isdigit() or not low <= int(value) <= high:
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
    where = f"probes.profiles.{name}"
    if name in BUILTIN_PROFILES:
        raise ConfigError(f"{where}: {name!r} is a built-in profile; give yours another name")
    if not re.match(r"^[a-zA-Z0-9_.-]+$", name):
        raise ConfigError(f"{where}: a profile name may only contain letters, digits, '_', '.' and '-'")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of fio options, e.g. {{rw: read, bs: 128k, iodepth: 32}}")
    options: List[Tuple[str, str]] = []
    path_expectation: Optional[bool] = None
    for key, value in raw.items():
        key = str(key)
        if key == "expect_path_bandwidth":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}.expect_path_bandwidth: expected true or false")
            path_expectation = value
            continue
        option = _ALIASES.get(key, key)
        text = _option_text(value)
        if option == "rw" and text not in READ_WORKLOADS:
            raise ConfigError(f"{where}.{key}: {text!r} is not a read workload; probes only ever read "
                              f"(allowed: {', '.join(READ_WORKLOADS)})")
        if _WRITE_OPTIONS.match(option):
            raise ConfigError(f"{where}.{key}: fio option {key!r} is refused: probes only ever read, with the "
                              f"target and direct I/O set by storpath")
        check = ALLOWED_OPTIONS.get(option)
        if check is None:
            raise ConfigError(f"{where}.{key}: fio option {key!r} is not allowed in a probe profile "
                              f"(allowed: {', '.join(sorted(ALLOWED_OPTIONS))})")
        problem = check(text)
        if problem:
            raise ConfigError(f"{where}.{key}: {text!r}: {problem}")
        if any(existing == option for existing, _ in options):
            raise ConfigError(f"{where}.{key}: option {option!r} given twice")
        options.append((option, text))
    keys = {k for k, _ in options}
    if "rw" not in keys:
        raise ConfigError(f"{where}: set rw (read or randread)")
    block: Optional[int] = 4096
    if "bssplit" in keys:
        block = None
    elif "bs" in keys:
        block = parse_size(dict(options)["bs"])
    if path_expectation is None:
        path_expectation = block is not None and block >= PATH_EXPECTATION_MIN_BLOCK
    return Profile(name=name, options=tuple(options), block_bytes=block, path_expectation=path_expectation)


# ---- the section -------------------------------------------------------------------

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE]\d+)?)\s*([kKMGT]i?B/s|[kKMGT]B/s|B/s)?\s*$")
_RATE_SCALE = {"B/s": 1, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
               "KiB/s": 1 << 10, "kiB/s": 1 << 10, "MiB/s": 1 << 20, "GiB/s": 1 << 30, "TiB/s": 1 << 40}


def parse_rate(value: Any) -> float:
    """Bytes per second: 7300000000, '7.3GB/s', '7300 MB/s', '6.8GiB/s' (as data sheets write them)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        match = _RATE.match(str(value))
        if not match or (match.group(2) and match.group(2) not in _RATE_SCALE):
            raise ValueError(f"invalid throughput {value!r} (expected e.g. 7.3GB/s, 3500MB/s or bytes per second)")
        number = float(match.group(1)) * _RATE_SCALE[match.group(2) or "B/s"]
    if number <= 0:
        raise ValueError(f"throughput must be above 0, got {value!r}")
    return number


_TOP_KEYS = ("targets", "profiles", "runtime", "interval", "jitter", "timeout", "io_budget_per_hour",
             "busy_threshold", "busy_sample", "file_size", "io_priority", "fio", "state_file")
_TARGET_KEYS = ("device", "file", "name", "profiles", "expected_read_bytes_per_second", "device_name", "file_size")


def _duration(where: str, value: Any, minimum: float = 0.0) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if seconds < minimum:
        raise ConfigError(f"{where}: must be at least {minimum:g}s, got {value!r}")
    return seconds


def _size(where: str, value: Any) -> int:
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if size <= 0:
        raise ConfigError(f"{where}: must be above 0, got {value!r}")
    return size


def check_target(raw: Any, profiles: Mapping[str, Profile], where: str = "probes.targets[0]") -> Target:
    if isinstance(raw, str):
        raw = {"device": raw} if raw.startswith("/dev/") else {"file": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with `device: /dev/...` or `file: /path`")
    for key in raw:
        if key not in _TARGET_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(_TARGET_KEYS)})")
    if ("device" in raw) == ("file" in raw):
        raise ConfigError(f"{where}: give exactly one of `device` (a block device) or `file` (a file storpath creates)")
    kind = "device" if "device" in raw else "file"
    path = raw[kind]
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ConfigError(f"{where}.{kind}: expected an absolute path, got {path!r}")
    path = os.path.normpath(path)
    if kind == "file":
        if path == "/dev" or path.startswith("/dev/") or path.startswith("/sys/") or path.startswith("/proc/"):
            raise ConfigError(f"{where}.file: {path} is under /dev, /sys or /proc: a file target must be a regular "
                              f"file on a filesystem (use `device:` for a block device)")
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
        if profile not in profiles:
            raise ConfigError(f"{where}.profiles: unknown profile {profile!r} (known: {', '.join(sorted(profiles))})")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{where}.profiles: a profile is listed twice")
    expected: Dict[str, float] = {}
    expected_all = None
    raw_expected = raw.get("expected_read_bytes_per_second")
    try:
        if isinstance(raw_expected, dict):
            for profile, value in raw_expected.items():
                if profile not in chosen:
                    raise ConfigError(f"{where}.expected_read_bytes_per_second: profile {profile!r} is not probed on "
                                      f"this target (probed: {', '.join(chosen)})")
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
        file_size = _size(f"{where}.file_size", raw["file_size"])
    return Target(name=name, kind=kind, path=path, profiles=tuple(chosen), expected=expected,
                  expected_all=expected_all, device_name=device_name, file_size=file_size)


def check(raw: Any) -> ProbesConfig:
    """Validate the `probes:` section; raise ConfigError naming the first bad key."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError("probes: expected a mapping (see docs/probes.md)")
    for key in raw:
        if key not in _TOP_KEYS:
            raise ConfigError(f"unknown key probes.{key} (known: {', '.join(_TOP_KEYS)})")
    defaults = ProbesConfig()
    raw_profiles = raw.get("profiles") or {}
    if not isinstance(raw_profiles, dict):
        raise ConfigError("probes.profiles: expected a mapping of profile name to fio options")
    profiles: Dict[str, Profile] = dict(BUILTIN_PROFILES)
    for name, options in raw_profiles.items():
        profiles[str(name)] = check_profile(str(name), options)

    settings: Dict[str, Any] = {}
    for key in ("runtime", "interval", "jitter", "busy_sample"):
        if key in raw:
            minimum = {"runtime": 1.0, "interval": 10.0, "busy_sample": 0.1}.get(key, 0.0)
            settings[key] = _duration(f"probes.{key}", raw[key], minimum)
    if raw.get("timeout") is not None:
        settings["timeout"] = _duration("probes.timeout", raw["timeout"], 1.0)
    for key in ("io_budget_per_hour", "file_size"):
        if key in raw:
            settings[key] = _size(f"probes.{key}", raw[key])
    if "busy_threshold" in raw:
        value = raw["busy_threshold"]
        if value is None or value is False:
            settings["busy_threshold"] = None
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"probes.busy_threshold: expected a fraction of time busy above 0 and at most 1 "
                              f"(e.g. 0.5), or null to never skip; got {value!r}")
        else:
            settings["busy_threshold"] = float(value)
    if "io_priority" in raw:
        if raw["io_priority"] not in ("idle", "best-effort"):
            raise ConfigError(f"probes.io_priority: expected idle or best-effort, got {raw['io_priority']!r}")
        settings["io_priority"] = raw["io_priority"]
    for key in ("fio", "state_file"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise ConfigError(f"probes.{key}: expected a string, got {raw[key]!r}")
            settings[key] = raw[key]
    if settings.get("fio", "fio") == "":
        raise ConfigError("probes.fio: expected the fio binary's name or path")
    runtime = settings.get("runtime", defaults.runtime)
    if settings.get("timeout") is not None and settings["timeout"] <= runtime:
        raise ConfigError(f"probes.timeout: must be longer than probes.runtime ({runtime:g}s)")

    raw_targets = raw.get("targets") or []
    if not isinstance(raw_targets, list):
        raise ConfigError("probes.targets: expected a list of targets")
    targets = tuple(check_target(t, profiles, f"probes.targets[{i}]") for i, t in enumerate(raw_targets))
    for attr, what in (("name", "name"), ("path", "path")):
        seen = set()
        for target in targets:
            value = getattr(target, attr)
            if value in seen:
                raise ConfigError(f"probes.targets: two targets have the {what} {value!r}")
            seen.add(value)
    return ProbesConfig(targets=targets, profiles=profiles, **settings)


def from_full_config(config: Mapping[str, Any]) -> ProbesConfig:
    probes = config.get("probes")
    return probes if isinstance(probes, ProbesConfig) else check(probes)


SECTION_VALIDATORS["probes"] = check
