"""The YAML config file, merged with defaults and checked up front.

Layout (every key optional):

    web:
      listen_address: ":9866"
      config_file: ""                 # TLS and basic auth, exporter-toolkit format (see README)
      telemetry_path: /metrics
      max_requests: 40                # concurrent scrapes; more get 503; 0: no limit
      disable_exporter_metrics: false # leave out process_* and python_*
      scrape_timeout: 10s             # deadline of a scrape when the scraper sends none
      runbook_url_base: https://...   # where the landing page links runbooks (<base><AlertName>.md)
    paths: {sysfs: /sys, procfs: /proc, dev: /dev}
    log: {level: info, format: logfmt}
    collectors:
      pcie: {enabled: true, ...}     # each collector's own keys: see docs/configuration.md
    probes: {...}                    # see docs/probes.md

Command-line flags override the file. A broken file is refused at start with a
message that names the key, so a typo never silently turns a check off.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, List, Optional

import yaml

from storpath.log import FORMATS, LEVELS
from storpath.units import parse_duration, parse_size

DEFAULT_PORT = 9866

DEFAULTS: Dict[str, Any] = {
    # runbook_url_base: where the landing page links a finding's runbook (<base><AlertName>.md), as
    # rules/config/thresholds.yml does for the alerts; point it at a copy of docs/runbooks/ you serve.
    "web": {"listen_address": f":{DEFAULT_PORT}", "config_file": "", "telemetry_path": "/metrics",
            "max_requests": 40, "disable_exporter_metrics": False, "scrape_timeout": "10s",
            "runbook_url_base": "https://github.com/storpath/storpath/blob/main/docs/runbooks/"},
    "paths": {"sysfs": "/sys", "procfs": "/proc", "dev": "/dev", "captured": ""},
    "log": {"level": "info", "format": "logfmt"},
    "collectors": {},
}

# Top-level sections other modules own and validate themselves (e.g. probes).
SECTION_VALIDATORS: Dict[str, Callable[[Any], Any]] = {}


class ConfigError(ValueError):
    pass


# The shortest interval of any background task (a key named `interval` or `*_interval`)
# a collector does not set its own minimum for: 0 would run the task back to back (an
# NVMe Identify or a zpool fork without pause).
INTERVAL_MINIMUM = 10.0


class Duration(float):
    """A config default of this type accepts '30s', '5m', '1h' as well as plain seconds
    (finite, at most 366 days). `minimum`: the shortest value accepted; an interval
    without one gets INTERVAL_MINIMUM."""

    def __new__(cls, value: float, minimum: Optional[float] = None) -> "Duration":
        duration = super().__new__(cls, value)
        duration.minimum = minimum
        return duration


def _duration_minimum(where: str, default: Duration) -> float:
    if getattr(default, "minimum", None) is not None:
        return default.minimum
    return INTERVAL_MINIMUM if where.rsplit(".", 1)[-1].endswith("interval") else 0.0


def check_duration(where: str, value: Any, minimum: float = 0.0) -> float:
    """A duration setting in seconds; ConfigError naming `where` and the minimum."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if seconds < minimum:
        raise ConfigError(f"{where}: must be at least {minimum:g}s, got {value!r}")
    return seconds


def check_size(where: str, value: Any, maximum: Optional[int] = None) -> int:
    """A size setting in bytes, above 0 and at most `maximum`; ConfigError naming `where`."""
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if size <= 0:
        raise ConfigError(f"{where}: must be above 0, got {value!r}")
    if maximum is not None and size > maximum:
        raise ConfigError(f"{where}: must be at most {maximum} bytes, got {value!r}")
    return size


def _finite(number: Any) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer beyond any float
        return False


def _check_type(where: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(default, Duration):
        return Duration(check_duration(where, value, _duration_minimum(where, default)), default.minimum)
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return type(default)(value) if isinstance(default, float) else value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(default, list):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return value
    return value


def validate(raw: Optional[Dict[str, Any]], collector_defaults: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Merge `raw` onto the defaults; raise ConfigError naming the first bad key."""
    config = copy.deepcopy(DEFAULTS)
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError("the config file must be a YAML mapping at the top level")
    known = set(DEFAULTS) | set(SECTION_VALIDATORS)
    for key in raw:
        if key not in known:
            raise ConfigError(f"unknown top-level key {key!r} (known: {', '.join(sorted(known))})")
    for section in ("web", "paths", "log"):
        value = raw.get(section) or {}
        if not isinstance(value, dict):
            raise ConfigError(f"{section}: expected a mapping")
        for key, item in value.items():
            if key not in DEFAULTS[section]:
                raise ConfigError(f"unknown key {section}.{key} (known: {', '.join(DEFAULTS[section])})")
            config[section][key] = _check_type(f"{section}.{key}", item, DEFAULTS[section][key])
    if config["log"]["level"] not in LEVELS:
        raise ConfigError(f"log.level: {config['log']['level']!r} is not one of {', '.join(LEVELS)}")
    if config["log"]["format"] not in FORMATS:
        raise ConfigError(f"log.format: {config['log']['format']!r} is not one of {', '.join(FORMATS)}")
    check_web(config["web"])
    collectors = raw.get("collectors") or {}
    if not isinstance(collectors, dict):
        raise ConfigError("collectors: expected a mapping of collector name to settings")
    for name, section in collectors.items():
        if name not in collector_defaults:
            raise ConfigError(f"unknown collector {name!r} (known: {', '.join(sorted(collector_defaults))})")
        section = section or {}
        if not isinstance(section, dict):
            raise ConfigError(f"collectors.{name}: expected a mapping")
        checked: Dict[str, Any] = {}
        for key, value in section.items():
            if key == "enabled":
                checked[key] = _check_type(f"collectors.{name}.enabled", value, True)
            elif key in collector_defaults[name]:
                checked[key] = _check_type(f"collectors.{name}.{key}", value, collector_defaults[name][key])
            else:
                known_keys = ", ".join(["enabled", *collector_defaults[name]])
                raise ConfigError(f"unknown key collectors.{name}.{key} (known: {known_keys})")
        config["collectors"][name] = checked
    for section, check in SECTION_VALIDATORS.items():
        if section in raw:
            try:
                config[section] = check(raw[section])
            except ConfigError:
                raise
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{section}: {exc}") from None
    return config


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain PyYAML keeps
    the last one and silently drops the first)."""

    def construct_mapping(self, node, deep=False):
        seen: Dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first != key_node.start_mark.line + 1:
                raise _DuplicateKey(f"the key {key!r} is given twice (lines {first} and {key_node.start_mark.line + 1})")
        return super().construct_mapping(node, deep)


def parse_text(text: str, name: str = "<config>") -> Any:
    """The YAML document of a config file; ConfigError naming `name` when it is not one."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise ConfigError(f"config file {name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {name} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {name} is not valid YAML: nested too deeply") from None


def check_web(web: Dict[str, Any]) -> None:
    """The web section's values beyond their types (the flags land here too)."""
    path = web["telemetry_path"]
    if not path.startswith("/") or any(c in path for c in "?# \t\n"):
        raise ConfigError(f"web.telemetry_path: {path!r} must be a URL path starting with / (e.g. /metrics)")
    if path.startswith("/-/"):
        raise ConfigError(f"web.telemetry_path: {path!r} would hide the health endpoints under /-/")
    if web["max_requests"] < 0:
        raise ConfigError(f"web.max_requests: {web['max_requests']} is negative (0 means no limit)")
    timeout = web["scrape_timeout"]
    try:
        web["scrape_timeout"] = timeout if isinstance(timeout, float) else parse_duration(timeout)
    except ValueError as exc:
        raise ConfigError(f"web.scrape_timeout: {exc}") from None
    if not 0 < web["scrape_timeout"] <= 3600:
        raise ConfigError(f"web.scrape_timeout: {web['scrape_timeout']} s is not between 0 and 1h")


def load_file(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: byte {exc.start} is {raw[exc.start]:#04x}") from None
    data = parse_text(text, path)
    return data or {}


__all__: List[str] = ["ConfigError", "Duration", "DEFAULTS", "DEFAULT_PORT", "INTERVAL_MINIMUM", "SECTION_VALIDATORS",
                      "check_duration", "check_size", "validate", "load_file", "parse_text", "parse_duration", "parse_size"]
