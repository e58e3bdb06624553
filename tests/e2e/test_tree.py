"""`storpath tree` on every fixture machine, compared with checked-in golden text
(Unicode and ASCII), as `storpath check` draws it for a pipe: 80 columns, no colour.

Regenerate after an intended change with
    STORPATH_UPDATE_GOLDEN=1 python -m pytest tests/e2e/test_tree.py
(or `make golden`) and review the diff like code.
"""

from __future__ import annotations

import logging
import os

import pytest

from storpath import cli
from tests.fixtures import machines

CASES = machines.all_cases()
UPDATE = bool(os.environ.get("STORPATH_UPDATE_GOLDEN"))


@pytest.fixture(autouse=True)
def storpath_logger_restored():
    """cli.main runs in this process here: it sets up the storpath logger (handlers, level,
    no propagation) as a command does; put it back so later tests see what they expect."""
    logger = logging.getLogger("storpath")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def tree_text(root: str, *flags: str, capsys, monkeypatch) -> str:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    capsys.readouterr()
    status = cli.main(["tree", *flags, f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc",
                       f"--path.captured={root}/captured"])
    out = capsys.readouterr().out
    assert status in (0, 1, 2), out
    return out


def golden_path(name: str, variant: str, ascii: bool) -> str:
    return os.path.join(machines.load(name).folder, "golden", f"{variant}.tree{'.ascii' if ascii else ''}.txt")


@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_tree_matches_golden(name, variant, ascii, machine_tree, capsys, monkeypatch):
    text = tree_text(machine_tree(name, variant), *(["--ascii"] if ascii else []), capsys=capsys,
                     monkeypatch=monkeypatch)
    assert "\033[" not in text, "colour on a pipe"
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, long
    if ascii:
        assert text.isascii(), [line for line in text.splitlines() if not line.isascii()]
    golden = golden_path(name, variant, ascii)
    if UPDATE:
        with open(golden, "w") as handle:
            handle.write(text)
    assert os.path.exists(golden), f"no golden file {golden}: run `make golden` and review it"
    with open(golden) as handle:
        assert text == handle.read(), f"tree of {name}:{variant} differs from {golden}; `make golden` if intended"


def test_check_tree_is_storpath_tree(machine_tree, capsys, monkeypatch):
    root = machine_tree("intel-r2224wft-switches", "uplink-x4")
    assert tree_text(root, capsys=capsys, monkeypatch=monkeypatch) == _check_tree(root, capsys, monkeypatch)


def _check_tree(root, capsys, monkeypatch) -> str:
    capsys.readouterr()
    status = cli.main(["check", "--tree", f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc",
                       f"--path.captured={root}/captured"])
    assert status == 1  # warnings: the trained-low link is a warning, as its alert (PcieLinkWidthBelowExpected)
    return capsys.readouterr().out


def test_faulty_hop_is_marked_on_its_line(machine_tree, capsys, monkeypatch):
    text = tree_text(machine_tree("intel-r2224wft-switches", "uplink-x4"), capsys=capsys, monkeypatch=monkeypatch)
    lines = text.splitlines()
    hop = next(i for i, line in enumerate(lines) if "0000:d8:00.0" in line)
    assert "✗ below expected" in lines[hop] and "◀ limits nvme4n1 and 3 more" in lines[hop]
    assert lines[hop + 1].endswith("link 8 GT/s x4 (expected 8 GT/s x8, max 8 GT/s x8)")
    assert "WARNING PCIe link trained at x4, both ends support x8" in lines[hop + 2]


def test_colour_when_asked(machine_tree, capsys, monkeypatch):
    painted = tree_text(machine_tree("am4-x570-firecuda", "x2-link"), "--color=always", capsys=capsys,
                        monkeypatch=monkeypatch)
    assert "\033[1;31m✗ below expected\033[0m" in painted
    assert "\033[1;33mWARNING\033[0m PCIe link trained at x2" in painted


def test_docs_show_the_golden_trees_of_the_switch_and_epyc_hosts():
    from tests.conftest import ROOT

    with open(os.path.join(ROOT, "docs", "check.md")) as handle:
        doc = handle.read()
    for name, variant in (("intel-r2224wft-switches", "uplink-x4"), ("epyc-7443-highpoint", "nps1")):
        with open(golden_path(name, variant, ascii=False)) as handle:
            assert "```\n" + handle.read() + "```" in doc, f"docs/check.md: the tree of {name}:{variant} is stale"
