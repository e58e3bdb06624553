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
      runbook_url_base: https://...   # where the landing page links runbooks (<base><AlertName>.md)
    paths: {sysfs: /sys, procfs: /proc, dev: /dev}
    log: {level: info, format: logfmt}
    collectors:
      pcie: {enabled: true, ...}     # each collector's own keys: see docs/configuration.md
    probes: {...}                    # see docs/probes.md

Command-line flags override the file. A broken file is refused at start with a
message that names the key, so a typo never silently turns a check off. Every YAML file
storpath reads goes through one bounded loader (load_file: size, depth, no anchors or
aliases), and a message shows a value only as log.describe cuts it.
"""

from __future__ import annotations

import copy
import math
import os
import re
import stat
from typing import Any, Callable, Dict, List, Optional

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml
    CParser = None

from storpath.log import FORMATS, LEVELS, describe
from storpath.units import parse_duration, parse_size

DEFAULT_PORT = 9866

DEFAULTS: Dict[str, Any] = {
    # runbook_url_base: where the landing page links a finding's runbook (<base><AlertName>.md), as
    # rules/config/thresholds.yml does for the alerts; point it at a copy of docs/runbooks/ you serve.
    "web": {"listen_address": f":{DEFAULT_PORT}", "config_file": "", "telemetry_path": "/metrics",
            "max_requests": 40, "disable_exporter_metrics": False, "scrape_timeout": "10s",
            "read_blocked_after": "5s",
            "runbook_url_base": "https://github.com/storpath/storpath/blob/main/docs/runbooks/"},
    "paths": {"sysfs": "/sys", "procfs": "/proc", "dev": "/dev", "captured": ""},
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
    for section in ("web", "paths", "log"):
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


# Every YAML file storpath reads (--config.file, --web.config.file) goes through one loader,
# bounded so that no file can make the exporter spend minutes or gigabytes:
# - at most MAX_FILE_BYTES (a storpath config is a few KiB; a thousand probe targets ~100 KiB);
# - no anchors or aliases (&name, *name): a config has no use for them, and nested aliases
#   expand into billions of values (the "billion laughs") in anything that walks the result;
# - at most MAX_DEPTH levels of nesting;
# - a key given twice in one mapping is refused (plain PyYAML silently keeps the last one).
# Measured on a shared 2-core machine, 1 MB of YAML: libyaml's scanner and parser take 0.2 s where PyYAML's own take
# 1.2 s (a flow list of 500k numbers: 1.8 s against 8.5 s), so libyaml is used where present.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64


class _Refused(Exception):
    pass


class _BoundedComposer(Composer):
    """PyYAML's composer, refusing anchors, aliases and deep nesting."""

    def __init__(self):
        Composer.__init__(self)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(f"line {event.start_mark.line + 1}: YAML anchors and aliases (&name, *name) are not "
                           f"accepted in a storpath config: write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _UniqueKeyConstructor(SafeConstructor):
    """YAML's safe constructor (plain data, no Python objects), refusing a key given twice."""

    def construct_mapping(self, node, deep=False):
        seen: Dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first != key_node.start_mark.line + 1:
                raise _Refused(f"the key {describe(key)} is given twice (lines {first} and "
                               f"{key_node.start_mark.line + 1})")
        return super().construct_mapping(node, deep)


class PythonLoader(Reader, Scanner, Parser, _BoundedComposer, _UniqueKeyConstructor, Resolver):
    """PyYAML's own scanner and parser: where PyYAML was built without libyaml."""

    def __init__(self, stream):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _UniqueKeyConstructor.__init__(self)
        Resolver.__init__(self)


if CParser is not None:
    class LibyamlLoader(_BoundedComposer, CParser, _UniqueKeyConstructor, Resolver):
        """libyaml's events, composed by _BoundedComposer (which comes first, so that its
        checks replace libyaml's own composer)."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            _UniqueKeyConstructor.__init__(self)
            Resolver.__init__(self)

    LOADER: type = LibyamlLoader
else:
    LOADER = PythonLoader


def parse_text(text: str, name: str = "<config>") -> Any:
    """The YAML document of a config file; ConfigError naming `name` when it is not one,
    or breaks a bound above."""
    loader = LOADER(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise ConfigError(f"config file {name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {name} is not valid YAML: {_cut(str(exc))}") from None
    except (ValueError, OverflowError) as exc:  # an integer of 5000 digits, a date in year 0
        raise ConfigError(f"config file {name}: a value cannot be read: {_cut(str(exc).split(';')[0])}") from None
    finally:
        loader.dispose()


def _cut(text: str, limit: int = 300) -> str:
    """A parser's message, which quotes the file's own text, at most `limit` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


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


def load_file(path: str) -> Dict[str, Any]:
    """A YAML file's document, within the loader's bounds; ConfigError saying why not."""
    try:
        # O_NONBLOCK: a FIFO at the path must not hold the loop that also answers SIGTERM.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"config file {path} is not a regular file")
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_FILE_BYTES >> 20} MiB, the most storpath "
                          f"reads (a storpath config is a few KiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: byte {exc.start} is {raw[exc.start]:#04x}") from None
    data = parse_text(text, path)
    return data or {}


__all__: List[str] = ["ConfigError", "Duration", "DEFAULTS", "DEFAULT_PORT", "INTERVAL_MINIMUM", "SECTION_VALIDATORS",
                      "check_duration", "check_size", "validate", "load_file", "parse_text", "parse_duration",
                      "parse_size", "shown_key", "MAX_FILE_BYTES", "MAX_REQUESTS"]
