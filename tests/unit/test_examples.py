"""The example machines of `--example NAME`: listed one a line, each what its fixture machine
builds today (byte for byte), read by check, tree and serve instead of this host, and refused
with a message beside --path.* or under a name that is none."""

from __future__ import annotations

import logging

import pytest

from storpath import cli, examples
from tests.fixtures.examples import archive_bytes

# What `storpath check` says on each: the exit status (0 clean, 1 warnings, 2 critical) and a line.
EXPECTED = {
    "healthy-server": (0, "clean: no problems found"),
    "gen4-at-gen3": (1, "PCIe link trained at 8 GT/s (Gen3), both ends support 16 GT/s (Gen4)"),
    "md-degraded": (2, "raid1 array degraded: 1 of 2 members missing"),
    "raid-shelf-1.5g": (1, "at 1.5 Gbit/s"),
    "vm": (0, "a virtual machine (qemu)"),
}


@pytest.fixture(autouse=True)
def storpath_logger_restored():
    logger = logging.getLogger("storpath")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def test_every_example_has_its_expectation():
    assert list(EXPECTED) == [example.name for example in examples.EXAMPLES]


@pytest.mark.parametrize("example", examples.EXAMPLES, ids=lambda e: e.name)
def test_archive_is_what_its_fixture_machine_builds(example):
    with open(example.archive, "rb") as handle:
        shipped = handle.read()
    assert shipped == archive_bytes(example), \
        f"{example.archive} is stale: `make examples` (python -m tests.fixtures.examples)"
    assert len(shipped) < 64 * 1024  # small enough for the wheel


def test_list_is_one_example_a_line_name_first(capsys):
    assert cli.main(["check", "--example", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [example.name for example in examples.EXAMPLES]
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines), lines


@pytest.mark.parametrize("name", EXPECTED)
def test_check_reads_the_example(name, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    status, line = EXPECTED[name]
    assert cli.main(["check", "--example", name]) == status
    out = capsys.readouterr().out
    assert line in out.replace("\n  ", " "), out


def test_tree_shows_the_limiting_hop(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["tree", "--example", "gen4-at-gen3", "--color=never"]) == 1
    out = capsys.readouterr().out
    assert "0000:06:00.0" in out and "WARNING" in out, out


def test_example_beside_a_path_flag_is_refused(capsys):
    assert cli.main(["check", "--example", "vm", "--path.sysfs=/sys"]) == 3
    assert "--example reads its own machine: leave out --path.sysfs" in capsys.readouterr().err


def test_unknown_example_names_the_ones_there_are(capsys):
    assert cli.main(["tree", "--example", "gen5"]) == 3
    err = capsys.readouterr().err
    assert "no example 'gen5'" in err and "healthy-server" in err and "--example list" in err, err
