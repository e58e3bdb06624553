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
      state_file: probes.json      # inside storpath's state directory: $STATE_DIRECTORY or /var/lib/storpath
      profiles:                    # user profiles; seqread and randread are built in
        seq128k: {rw: read, bs: 128k, iodepth: 32}
      targets:
        - device: /dev/md0
          expected_read_bytes_per_second: 28GB/s
        - file: /tank/data/.storpath-probe
          profiles: [seqread]

Safety first: profiles only read (storpath.scrape.probes.profiles), a file target is never under
/dev, /sys or /proc and has a bounded size (storpath.scrape.probes.targets), and the state file
lives in the state directory storpath owns, nowhere else.
"""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any, Dict, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.config import SECTION_VALIDATORS, ConfigError, check_duration, check_size, shown_key
from storpath.base.log import describe
from storpath.scrape.probes.profiles import (BUILTIN_PROFILES, DEFAULT_PROFILES, PATH_EXPECTATION_MIN_BLOCK,  # noqa: F401
                                      Profile, check_profile)
from storpath.scrape.probes.targets import MAX_FILE_SIZE, Target, check_target
from storpath.base.units import parse_rate  # noqa: F401  (the probes' throughput spelling, re-exported)

# Why a probe failed or was skipped: the `reason` label of the probes' failure and skip
# counters, every one exported from the start (storpath.scrape.probes.engine counts them).
FAILURE_REASONS = ("fio_missing", "timeout", "crashed", "fio_error", "bad_output", "target_unusable")
SKIP_REASONS = ("busy", "budget", "concurrent_probe")

STATE_FILE_NAME = "probes.json"


@datarecord(frozen=True)
class ProbesConfig:
    """The checked `probes:` section: targets, profiles, timing, I/O budget and fio settings."""

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


def state_directory() -> str:
    """The folder storpath owns for its state: systemd's StateDirectory= sets
    $STATE_DIRECTORY (a colon-separated list, the first is storpath's), else /var/lib/storpath."""
    return os.environ.get("STATE_DIRECTORY", "").split(":")[0] or "/var/lib/storpath"


def default_state_file() -> str:
    return os.path.join(state_directory(), STATE_FILE_NAME)


def check_state_file(value: Any) -> str:
    """probes.state_file: a file name inside the state directory (a relative name is taken
    inside it). Anywhere else is refused: storpath replaces that file whole, and must never
    replace a file it does not own."""
    if not isinstance(value, str):
        raise ConfigError(f"probes.state_file: expected a string, got {describe(value)}")
    folder = state_directory()
    if not value:
        return ""
    path = os.path.normpath(os.path.join(folder, value))
    real_folder = os.path.realpath(folder)
    real_parent = os.path.realpath(os.path.dirname(path))
    if os.path.commonpath([real_folder, real_parent]) != real_folder or os.path.basename(path) in ("", ".", ".."):
        raise ConfigError(f"probes.state_file: {value} is outside storpath's state directory {folder} "
                          f"($STATE_DIRECTORY, else /var/lib/storpath); give a file name inside it")
    return path


# ---- the section -------------------------------------------------------------------

_TOP_KEYS = ("targets", "profiles", "runtime", "interval", "jitter", "timeout", "io_budget_per_hour",
             "busy_threshold", "busy_sample", "file_size", "io_priority", "fio", "state_file")
# The shortest setting of each duration, named in the message that refuses a shorter one.
_MINIMUMS = {"runtime": 1.0, "interval": 10.0, "jitter": 0.0, "busy_sample": 0.1}


def check(raw: Any) -> ProbesConfig:
    """Validate the `probes:` section; raise ConfigError naming the first bad key."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError("probes: expected a mapping (see docs/probes.md)")
    for key in raw:
        if key not in _TOP_KEYS:
            raise ConfigError(f"unknown key probes.{shown_key(key)} (known: {', '.join(_TOP_KEYS)})")
    defaults = ProbesConfig()
    raw_profiles = raw.get("profiles") or {}
    if not isinstance(raw_profiles, dict):
        raise ConfigError("probes.profiles: expected a mapping of profile name to fio options")
    profiles: Dict[str, Profile] = dict(BUILTIN_PROFILES)
    for name, options in raw_profiles.items():
        profiles[str(name)] = check_profile(str(name), options)

    settings: Dict[str, Any] = {}
    for key, minimum in _MINIMUMS.items():
        if key in raw:
            settings[key] = check_duration(f"probes.{key}", raw[key], minimum)
    if raw.get("timeout") is not None:
        settings["timeout"] = check_duration("probes.timeout", raw["timeout"], 1.0)
    if "io_budget_per_hour" in raw:
        settings["io_budget_per_hour"] = check_size("probes.io_budget_per_hour", raw["io_budget_per_hour"])
    if "file_size" in raw:
        settings["file_size"] = check_size("probes.file_size", raw["file_size"], MAX_FILE_SIZE)
    if "busy_threshold" in raw:
        value = raw["busy_threshold"]
        if value is None or value is False:
            settings["busy_threshold"] = None
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"probes.busy_threshold: expected a fraction of time busy above 0 and at most 1 "
                              f"(e.g. 0.5), or null to never skip; got {describe(value)}")
        else:
            settings["busy_threshold"] = float(value)
    if "io_priority" in raw:
        if raw["io_priority"] not in ("idle", "best-effort"):
            raise ConfigError(f"probes.io_priority: expected idle or best-effort, got {describe(raw['io_priority'])}")
        settings["io_priority"] = raw["io_priority"]
    if "fio" in raw:
        if not isinstance(raw["fio"], str):
            raise ConfigError(f"probes.fio: expected a string, got {describe(raw['fio'])}")
        settings["fio"] = raw["fio"]
    if "state_file" in raw:
        settings["state_file"] = check_state_file(raw["state_file"])
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
                raise ConfigError(f"probes.targets: two targets have the {what} {describe(value)}")
            seen.add(value)
    return ProbesConfig(targets=targets, profiles=profiles, **settings)


def from_full_config(config: Mapping[str, Any]) -> ProbesConfig:
    probes = config.get("probes")
    return probes if isinstance(probes, ProbesConfig) else check(probes)


SECTION_VALIDATORS["probes"] = check
