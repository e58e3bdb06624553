"""The YAML config file, merged with defaults and checked up front.

Layout (every key optional):

    web:
      listen_address: ":9866"
    paths: {sysfs: /sys, procfs: /proc, dev: /dev}
    log: {level: info}
    collectors:
      pcie: {enabled: true, ...}     # each collector's own keys: see docs/configuration.md
    probes: {...}                    # see docs/probes.md

Command-line flags override the file. A broken file is refused at start with a
message that names the key, so a typo never silently turns a check off.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional

import yaml

from storpath.units import parse_duration, parse_size

DEFAULT_PORT = 9866

DEFAULTS: Dict[str, Any] = {
    "web": {"listen_address": f":{DEFAULT_PORT}"},
    "paths": {"sysfs": "/sys", "procfs": "/proc", "dev": "/dev", "captured": ""},
    "log": {"level": "info"},
    "collectors": {},
}

# Top-level sections other modules own and validate themselves (e.g. probes).
SECTION_VALIDATORS: Dict[str, Callable[[Any], Any]] = {}


class ConfigError(ValueError):
    pass


class Duration(float):
    """A config default of this type accepts '30s', '5m', '1h' as well as plain seconds."""


def _check_type(where: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(default, Duration):
        try:
            return Duration(parse_duration(value))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
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
    from storpath.log import LEVELS

    if config["log"]["level"] not in LEVELS:
        raise ConfigError(f"log.level: {config['log']['level']!r} is not one of {', '.join(LEVELS)}")
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


def load_file(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    return data or {}


__all__: List[str] = ["ConfigError", "Duration", "DEFAULTS", "DEFAULT_PORT", "SECTION_VALIDATORS", "validate", "load_file",
                      "parse_duration", "parse_size"]
