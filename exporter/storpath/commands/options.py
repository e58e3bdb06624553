"""The flags every subcommand that reads a machine shares, and how flags, the config file
and the defaults resolve into one config: what storpath.cli and the subcommands
(storpath.commands.*) both use, so that neither imports the other."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Dict

from storpath.base import log
from storpath.collectors import load_all
from storpath import examples
from storpath.base.config import ConfigError, check_web, validate
from storpath.base.roots import NO_DEVICES, Roots


def common_parser() -> argparse.ArgumentParser:
    """Flags shared by every subcommand that reads a machine."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("machine and config")
    group.add_argument("--config.file", dest="config_file", metavar="FILE", help="YAML config file.")
    group.add_argument("--path.sysfs", dest="path_sysfs", metavar="DIR", help="sysfs mount point (default /sys).")
    group.add_argument("--path.procfs", dest="path_procfs", metavar="DIR", help="procfs mount point (default /proc).")
    group.add_argument("--path.dev", dest="path_dev", metavar="DIR", help="device nodes (default /dev).")
    group.add_argument("--path.captured", dest="path_captured", metavar="DIR",
                       help="Folder of captured command outputs (NVMe Identify, zpool) to read instead of running "
                            "the commands; `storpath capture` writes one.")
    group.add_argument("--path.tracefs", dest="path_tracefs", metavar="DIR",
                       help="tracefs mount point (default <sysfs>/kernel/tracing), read for the pcie_link_event "
                            "tracepoint where collectors.pcie.link_change_source asks for it.")
    group.add_argument("--example", dest="example", metavar="NAME",
                       help="Read one of the example machines shipped with storpath instead of this host (a "
                            "healthy server, a Gen4 drive at Gen3, a degraded md array, a RAID shelf at 1.5 Gbit/s, "
                            "a VM); `--example list` lists them.")
    group.add_argument("--log.level", dest="log_level", choices=list(log.LEVELS), help="Log level (default info).")
    group.add_argument("--log.format", dest="log_format", choices=list(log.FORMATS),
                       help="Log format (default logfmt).")
    collectors = parser.add_argument_group("collectors")
    collectors.add_argument("--collector.disable-defaults", dest="collector_disable_defaults", action="store_true",
                            help="Turn off every collector that is not enabled explicitly (by flag or config file).")
    for name, spec in load_all().items():
        state = "on" if spec.default_enabled else "off"
        collectors.add_argument(f"--collector.{name}", dest=f"collector_{name}", action="store_const", const=True,
                                help=f"Enable the {name} collector ({spec.help}). Default {state}.")
        collectors.add_argument(f"--no-collector.{name}", dest=f"collector_{name}", action="store_const", const=False,
                                help=f"Disable the {name} collector.")
    return parser


def resolve_config(args: argparse.Namespace) -> Dict:
    """Defaults <- config file <- flags. Raises ConfigError with a readable message."""
    specs = load_all()
    raw = {}
    if getattr(args, "config_file", None):
        from storpath.base.configfile import load_file  # PyYAML only where a file is read

        raw = load_file(args.config_file)
    config = validate(raw, {name: spec.cls.config_defaults for name, spec in specs.items()})
    for flag, key in (("path_sysfs", "sysfs"), ("path_procfs", "procfs"), ("path_dev", "dev"),
                      ("path_captured", "captured"), ("path_tracefs", "tracefs")):
        if getattr(args, flag, None):
            config["paths"][key] = getattr(args, flag)
    if getattr(args, "example", None):
        example_paths(args, config["paths"])
    paths = config["paths"]
    dev_given = bool(getattr(args, "path_dev", None)) or "dev" in ((raw or {}).get("paths") or {})
    if not dev_given and os.path.normpath(paths["sysfs"]) != "/sys":
        paths["dev"] = ""  # another machine's sysfs: this host's device nodes are not its devices
    if getattr(args, "log_level", None):
        config["log"]["level"] = args.log_level
    if getattr(args, "log_format", None):
        config["log"]["format"] = args.log_format
    web_flags(args, config["web"])
    if getattr(args, "helper_socket", None):
        config["helper"]["socket"] = args.helper_socket
    for name in specs:
        value = getattr(args, f"collector_{name}", None)
        if value is not None:
            config["collectors"].setdefault(name, {})["enabled"] = value
        elif getattr(args, "collector_disable_defaults", False) and \
                "enabled" not in config["collectors"].get(name, {}):
            config["collectors"].setdefault(name, {})["enabled"] = False
    return config


def example_paths(args: argparse.Namespace, paths: Dict) -> None:
    """--example NAME: the example machine's folders instead of this host's (no device node)."""
    given = [f"--path.{key}" for key in ("sysfs", "procfs", "dev", "captured", "tracefs")
             if getattr(args, f"path_{key}", None)]
    if given:
        raise ConfigError(f"--example reads its own machine: leave out {', '.join(given)}")
    try:
        root = examples.unpack(args.example)
    except KeyError as exc:
        raise ConfigError(exc.args[0]) from None
    paths.update(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"), dev="",
                 captured=os.path.join(root, "captured"))


# serve's --web.* flags -> the config's web section.
WEB_FLAGS = ("listen_address", "config_file", "telemetry_path", "max_requests", "disable_exporter_metrics",
             "scrape_timeout", "read_blocked_after")


def web_flags(args: argparse.Namespace, web: Dict) -> None:
    for key in WEB_FLAGS:
        value = getattr(args, f"web_{key}", None)
        if value is not None:
            web[key] = value
    check_web(web)


def roots_from(config: Dict) -> Roots:
    paths = config["paths"]
    return Roots(sysfs=paths["sysfs"], procfs=paths["procfs"], dev=paths["dev"], captured=paths["captured"] or None,
                 tracefs=paths.get("tracefs") or None)


def say_no_devices(roots: Roots) -> None:
    """Log once that no device node is opened, where that leaves something unread (NVMe
    data not taken from --path.captured)."""
    if not roots.devices and not roots.captured:
        log.once(logging.getLogger("storpath"), logging.WARNING, ("no-devices",), NO_DEVICES)
