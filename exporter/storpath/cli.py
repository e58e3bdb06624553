"""`storpath` command line: subcommands are the modules in storpath.commands.

Flags follow node_exporter's style (--web.listen-address, --path.sysfs,
--collector.<name> / --no-collector.<name>, --log.level, --config.file). A flag given
on the command line overrides the config file; the file overrides the defaults.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import pkgutil
import sys
from typing import List, Optional

from storpath import __version__, commands, examples
from storpath.base import log
from storpath.base.config import DEFAULT_PORT, ConfigError

SHARED = {"options"}


def command_names() -> List[str]:
    """The subcommands: storpath.commands' modules, listed without importing them (but
    `options`, the flags and settings they share)."""
    return [info.name for info in pkgutil.iter_modules(commands.__path__) if info.name not in SHARED]


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` the one subcommand that will run: a
    subcommand's module is imported only when it runs (or for the whole --help), so
    `storpath serve` starts without check's, tree's and capture's imports."""
    from storpath.commands.options import common_parser  # every collector and reader: see main

    parser = argparse.ArgumentParser(
        prog="storpath",
        description="Shows when Linux storage runs below the speed its hardware can deliver.",
        epilog=f"Default listen port: {DEFAULT_PORT}. See `storpath SUBCOMMAND --help`.")
    parser.add_argument("--version", action="version", version=f"storpath {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    common = common_parser()
    for name in command_names():
        if only is None or name == only:
            importlib.import_module(f"{commands.__name__}.{name}").add_parser(sub, common)
    return parser


def never_fail_on_encoding() -> None:
    """Whatever the locale or PYTHONIOENCODING says, a character the output's encoding
    cannot hold is written as an escape (backslashreplace), never a traceback: a report
    that dies half-written would exit 1, which `storpath check` reads as "warnings"."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, io.UnsupportedOperation):
            pass  # not a text stream of io's (a test's stand-in): left as it is


def main(argv: Optional[List[str]] = None) -> int:
    never_fail_on_encoding()
    argv = sys.argv[1:] if argv is None else argv
    # No option before the subcommand takes a value, so its name is the first word that is
    # not an option; anything else (none, a typo) builds every subcommand for the message.
    word = next((a for a in argv if not a.startswith("-")), None)
    # Loading the command (its collectors, readers, the HTTP server) makes some 40,000 objects
    # that live as long as the process: the cyclic garbage collector would walk them again and
    # again while they load and find nothing to free. It runs again once they are loaded, with
    # what they made set aside (gc.freeze): all of it is young after the pause, so the first
    # young collection would otherwise walk all of it (7-19 ms of a start, for the few hundred
    # objects of garbage loading leaves; `storpath serve` collects those once serving settled,
    # Built.settle).
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = build_parser(word if word in command_names() else None)
        args = parser.parse_args(argv)
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "example", None) == examples.LIST:
        sys.stdout.write(examples.listing())
        return 0
    from storpath.commands.options import resolve_config  # loaded by build_parser

    try:
        config = resolve_config(args)
    except ConfigError as exc:
        log.setup("info")
        print(f"storpath: configuration error: {exc}", file=sys.stderr)
        # A command whose exit status carries a verdict (check: 2 = critical findings)
        # names its own status for "could not run".
        return getattr(args, "config_error_status", 2)
    log.setup(config["log"]["level"], fmt=config["log"]["format"])
    return args.run(args, config)
