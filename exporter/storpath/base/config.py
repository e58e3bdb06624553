"""The YAML config file, merged with defaults and checked up front.

Layout (every key optional):

    web:
      listen_address: ":9866"         # or a list: every address given is listened on
      config_file: ""                 # TLS and basic auth, exporter-toolkit format (see README)
      telemetry_path: /metrics
      max_requests: 40                # concurrent scrapes (at most 1024); more get 503; 0: no limit
      disable_exporter_metrics: false # leave out process_* and python_*
      scrape_timeout: 10s             # the server's deadline for one scrape (a client's header bounds only its wait)
      read_blocked_after: 5s          # a read outstanding this long means a device stopped answering
      runbook_url_base: runbooks/     # where the landing page links runbooks (<base><AlertName>.md): its own
    paths: {sysfs: /sys, procfs: /proc, dev: /dev}
    log: {level: info, format: logfmt}
    collectors:
      pcie: {enabled: true, ...}     # each collector's own keys: see docs/metrics.md and README.md's "Config file"
    probes: {...}                    # see docs/probes.md

Command-line flags override the file. A broken file is refused at start with a
message that names the key, so a typo never silently turns a check off. Every YAML file
storpath reads goes through one bounded loader (storpath.base.configfile.load_file: size, depth,
no anchors or aliases), and a message shows a value only as log.describe cuts it.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Callable, Dict, List, Optional

from storpath.base.log import FORMATS, LEVELS, describe
from storpath.base.units import parse_duration, parse_size

DEFAULT_PORT = 9866

DEFAULTS: Dict[str, Any] = {
    # runbook_url_base: where the landing page links a finding's runbook (<base><AlertName>.md), as
    # rules/config/thresholds.yml does for the alerts; by default the exporter's own copy
    # (storpath.http.runbooks, relative to the page), or a site's (a wiki, a mirror of docs/runbooks/).
    "web": {"listen_address": f":{DEFAULT_PORT}", "config_file": "", "telemetry_path": "/metrics",
            "max_requests": 40, "disable_exporter_metrics": False, "scrape_timeout": "10s",
            "read_blocked_after": "5s",
            "runbook_url_base": "runbooks/"},
    "paths": {"sysfs": "/sys", "procfs": "/proc", "dev": "/dev", "captured": "", "tracefs": ""},
    # socket: where `storpath serve` asks `storpath helper` for the reads that need a capability
    # (storpath.base.privhelper); "" runs them in the serving process, which then needs them.
    "helper": {"socket": ""},
    "log": {"level": "info", "format": "logfmt"},
    "collectors": {},
}

# The most concurrent scrapes web.max_requests may allow: each holds a worker thread (and a
# scrape's memory); a Prometheus pair needs a few, and thousands is a typo, not a setting.
MAX_REQUESTS = 1024

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


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def shown_key(key: Any) -> str:
    """A mapping key for a message: as written when it is a plain name, else described
    (quoted, escaped, cut) like any other value."""
    return key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else describe(key)


def check_duration(where: str, value: Any, minimum: float = 0.0) -> float:
    """A duration setting in seconds; ConfigError naming `where` and the minimum."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if seconds < minimum:
        raise ConfigError(f"{where}: must be at least {minimum:g}s, got {describe(value)}")
    return seconds


def check_size(where: str, value: Any, maximum: Optional[int] = None) -> int:
    """A size setting in bytes, above 0 and at most `maximum`; ConfigError naming `where`."""
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if size <= 0:
        raise ConfigError(f"{where}: must be above 0, got {describe(value)}")
    if maximum is not None and size > maximum:
        raise ConfigError(f"{where}: must be at most {maximum} bytes, got {describe(value)}")
    return size


def _finite(number: Any) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer beyond any float
        return False


def _check_type(where: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {describe(value)}")
        return value
    if isinstance(default, Duration):
        return Duration(check_duration(where, value, _duration_minimum(where, default)), default.minimum)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {describe(value)}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise ConfigError(f"{where}: expected a number, got {describe(value)}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {describe(value)}")
        return value
    if isinstance(default, list):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {describe(value)}")
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {describe(value)}")
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
            raise ConfigError(f"unknown top-level key {describe(key)} (known: {', '.join(sorted(known))})")
    for section in ("web", "paths", "helper", "log"):
        value = raw.get(section) or {}
        if not isinstance(value, dict):
            raise ConfigError(f"{section}: expected a mapping")
        for key, item in value.items():
            if key not in DEFAULTS[section]:
                raise ConfigError(f"unknown key {section}.{shown_key(key)} (known: {', '.join(DEFAULTS[section])})")
            if (section, key) == ("web", "listen_address"):
                config[section][key] = listen_addresses(item)
            else:
                config[section][key] = _check_type(f"{section}.{key}", item, DEFAULTS[section][key])
    if config["log"]["level"] not in LEVELS:
        raise ConfigError(f"log.level: {describe(config['log']['level'])} is not one of {', '.join(LEVELS)}")
    if config["log"]["format"] not in FORMATS:
        raise ConfigError(f"log.format: {describe(config['log']['format'])} is not one of {', '.join(FORMATS)}")
    check_web(config["web"])
    collectors = raw.get("collectors") or {}
    if not isinstance(collectors, dict):
        raise ConfigError("collectors: expected a mapping of collector name to settings")
    for name, section in collectors.items():
        if name not in collector_defaults:
            raise ConfigError(f"unknown collector {describe(name)} (known: {', '.join(sorted(collector_defaults))})")
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
                raise ConfigError(f"unknown key collectors.{name}.{shown_key(key)} (known: {known_keys})")
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


def listen_addresses(value: Any) -> List[str]:
    """web.listen_address (a string or a list of them) or the repeated --web.listen-address:
    the addresses to listen on, each once, at least one. Their form is checked when they are
    listened on."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise ConfigError(f"web.listen_address: expected an address or a list of them, got {describe(value)}")
    addresses: List[str] = []
    for item in values:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"web.listen_address: expected an address such as :9866, got {describe(item)}")
        if item not in addresses:
            addresses.append(item)
    return addresses


def check_web(web: Dict[str, Any]) -> None:
    """The web section's values beyond their types (the flags land here too)."""
    web["listen_address"] = listen_addresses(web["listen_address"])
    path = web["telemetry_path"]
    if not path.startswith("/") or any(c in path for c in "?# \t\n"):
        raise ConfigError(f"web.telemetry_path: {describe(path)} must be a URL path starting with / (e.g. /metrics)")
    if path.startswith("/-/"):
        raise ConfigError(f"web.telemetry_path: {describe(path)} would hide the health endpoints under /-/")
    if not 0 <= web["max_requests"] <= MAX_REQUESTS:
        raise ConfigError(f"web.max_requests: {describe(web['max_requests'])} is not between 0 (no limit) and "
                          f"{MAX_REQUESTS}")
    for key in ("scrape_timeout", "read_blocked_after"):
        value = web[key]
        try:
            web[key] = value if isinstance(value, float) else parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"web.{key}: {exc}") from None
        if not 0 < web[key] <= 3600:
            raise ConfigError(f"web.{key}: {web[key]} s is not between 0 and 1h")


__all__: List[str] = ["ConfigError", "Duration", "DEFAULTS", "DEFAULT_PORT", "INTERVAL_MINIMUM", "SECTION_VALIDATORS",
                      "check_duration", "check_size", "validate", "parse_duration", "parse_size", "shown_key",
                      "MAX_REQUESTS"]
