"""The rules fail on violations they have not seen spelled before: each is planted at runtime
in the package's own code (`plant`), a fixture machine is served and checked with it
(served.observe), and the rule names it."""

from __future__ import annotations

import textwrap
import types

import pytest

from storpath.scrape import exposition
from storpath.analysis import pcie as pcie_analysis
from storpath.collectors.block import BlockCollector
from storpath.readers.block import BlockReader
from tests.architecture.rules import io_violations, kept_state
from tests.architecture.served import observe

MACHINE = ("am4-x570-firecuda", "healthy")


def plant(monkeypatch, target: types.FunctionType, source: str, function: str = "") -> list:
    """Run `source` as if it were written in `target`'s module: its top-level lines run there
    (an import, a registry, a cache), and its function named `function` (target's own name by
    default) runs in place of `target`, whose code it takes, so every caller runs it however it
    found `target`. `original(...)` is `target` as it was. Everything is undone after the test.
    Returns the calls of `original` (the plant ran when there is one)."""
    home = target.__globals__
    assert target.__closure__ is None, "plant only functions without a closure"
    calls = []
    unchanged = types.FunctionType(target.__code__, home, target.__name__, target.__defaults__)
    unchanged.__kwdefaults__ = target.__kwdefaults__

    def original(*args, **kwargs):
        calls.append(args)
        return unchanged(*args, **kwargs)

    own = function or target.__name__
    before = dict(home)
    home["original"] = original
    exec(compile(textwrap.dedent(source), f"<planted in {home['__name__']}>", "exec"), home)
    replacement = home[own]
    planted = {name: value for name, value in home.items()
               if name != "__builtins__" and (name not in before or value is not before[name])}
    for name in planted:  # the module as it was, then each planted name set again through monkeypatch
        if name in before:
            home[name] = before[name]
        else:
            del home[name]
    for name, value in planted.items():
        if not (name == own and name in before):  # target's own name stays bound to target
            monkeypatch.setitem(home, name, value)
    for attribute in ("__code__", "__defaults__", "__kwdefaults__"):
        monkeypatch.setattr(target, attribute, getattr(replacement, attribute))
    return calls


@pytest.fixture
def machine(machine_tree):
    return machine_tree(*MACHINE)


# --- no I/O in a collector's values, analysis or rendering -------------------------------------

IO_PLANTS = {
    "a collector lists a directory through a reader's os": (BlockCollector.values, """
        from storpath.readers import block as block_reader

        def values(self, snapshot):
            block_reader.os.listdir(self.roots.sysfs)
            return original(self, snapshot)
        """, "os.listdir", "a collector's values"),
    "a collector calls a reader that opens files": (BlockCollector.values, """
        from storpath.readers.host import read_host

        def values(self, snapshot):
            read_host(self.roots)
            return original(self, snapshot)
        """, "open", "a collector's values"),
    "a collector reads a file with pathlib": (BlockCollector.values, """
        import pathlib

        def values(self, snapshot):
            pathlib.Path(__file__).read_text()
            return original(self, snapshot)
        """, "open", "a collector's values"),
    "analysis runs a command from a registry of callables": (pcie_analysis.current_bandwidth, """
        import functools, subprocess, sys

        RUNNERS = {"python": functools.partial(subprocess.run, [sys.executable, "-c", ""], check=False)}

        def current_bandwidth(device, exp):
            RUNNERS["python"]()
            return original(device, exp)
        """, "subprocess.Popen", "analysis"),
    "analysis opens a file through dataclasses.builtins": (pcie_analysis.expectations, """
        import dataclasses

        def expectations(devices, guest=False):
            with dataclasses.builtins.open(__file__, "rb") as handle:
                handle.read(1)
            return original(devices, guest)
        """, "open", "analysis"),
    "a collector spawns a process by a name it builds": (BlockCollector.values, """
        import os, sys

        def values(self, snapshot):
            spawn = getattr(os, "posix_" + "spawn")
            os.waitpid(spawn(sys.executable, [sys.executable, "-c", ""], os.environ), 0)
            return original(self, snapshot)
        """, "os.posix_spawn", "a collector's values"),
    "rendering connects a socket": (exposition.pieces, """
        import socket

        def pieces(families, openmetrics=False):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.connect(("127.0.0.1", 9))  # UDP: nothing is sent
            return original(families, openmetrics)
        """, "socket.connect", "rendering"),
}


@pytest.mark.parametrize("what", IO_PLANTS)
def test_io_planted_in_a_no_io_layer_is_found(monkeypatch, machine, what):
    target, source, event, layer = IO_PLANTS[what]
    calls = plant(monkeypatch, target, source)
    found = io_violations(observe(machine, scrapes=1).events)
    assert calls, "the plant did not run"
    assert [v for v in found if v.startswith(event + "(") and f" in {layer}: " in v], found


def test_a_reader_that_rewrites_a_collectors_values_is_found(monkeypatch, machine):
    """A reader finds the collector with pkgutil.resolve_name (no import names it) and puts a
    `values` of its own, written in the reader's module, in the collector's place: the frame
    is a reader module's, its object a collector."""
    monkeypatch.setattr(BlockCollector, "values", BlockCollector.values)  # what the reader does to it is undone
    calls = plant(monkeypatch, BlockReader.list, """
        import pkgutil

        collector_values = None

        def values(self, snapshot):
            with open(__file__, "rb") as handle:
                handle.read(1)
            return collector_values(self, snapshot)

        def read_listing(self):
            global collector_values
            collector = pkgutil.resolve_name("storpath.collectors.block:BlockCollector")
            if collector.values is not values:
                collector_values, collector.values = collector.values, values
            return original(self)
        """, function="read_listing")
    found = io_violations(observe(machine, scrapes=1).events)
    assert calls, "the plant did not run"
    assert [v for v in found if v.startswith("open(") and "storpath.readers.block.values" in v], found


# --- no state of their own between scrapes ------------------------------------------------------

STATE_PLANTS = {
    "a reader's cache made by calling lru_cache": (BlockReader.list, """
        import functools, time

        parsed = functools.lru_cache(maxsize=None)(str)

        def read_listing(self):
            parsed(time.monotonic())
            return original(self)
        """, "read_listing", "storpath.readers.block.parsed (a cache)"),
    "a cache in a mutable default argument": (BlockReader.list, """
        import time

        def read_listing(self, _seen=[]):
            _seen.append(time.monotonic())
            return original(self)
        """, "read_listing", "storpath.readers.block.BlockReader.list (default arguments)"),
    "a collector keeps rows with setattr": (BlockCollector.values, """
        def values(self, snapshot):
            rows = original(self, snapshot)
            setattr(self, "_last_" + "rows", rows)
            return rows
        """, "", "storpath.collectors.block.BlockCollector._last_rows"),
    "a module dict filled each scrape": (BlockCollector.values, """
        SEEN = {}

        def values(self, snapshot):
            SEEN[snapshot.taken_at] = len(snapshot.blocks)
            return original(self, snapshot)
        """, "", "storpath.collectors.block.SEEN"),
}


@pytest.mark.parametrize("what", STATE_PLANTS)
def test_state_planted_in_a_reader_or_collector_is_found(monkeypatch, machine, what):
    target, source, function, name = STATE_PLANTS[what]
    calls = plant(monkeypatch, target, source, function)
    found = kept_state(observe(machine, scrapes=2).taken)
    assert len(calls) >= 2, "the plant did not run on every scrape"
    assert name in found, found
