"""Every sysfs string that becomes a label is cut at the first NUL and stripped, in one place
(parse.cut_text, which sysfs.read_attr_why and parse.parse_identity use).

The case from the field: libnvme's published sysfs tree of an Apple NVMe controller (a tar of a
live sysfs; shared/field-data/peer-corpora-2, libnvme-tree-apple-nvme) holds each attribute's
text, the kernel's newline, then NULs up to the size tar recorded: `transport` is `apple-nvme\\n`
and 4085 NULs, which reached storpath_nvme_controller_info's `transport` label as it was. The
tests pad this project's own fixture machine the same way (no field data is committed)."""

from __future__ import annotations

import os
import re

import pytest
from prometheus_client import generate_latest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.host import HostCollector
from storpath.collectors.nvme import NvmeCollector
from storpath.collectors.pcie import PcieCollector
from storpath.report.exporter import StorpathExporter
from storpath.base.parse import cut_text, parse_identity
from storpath.base.roots import Roots
from storpath.base.sysfs import read_attr
from tests.fixtures import machines

TAR_PADDING = 4096  # a file that shrank while tar read it: padded with NULs to the size tar recorded


@pytest.mark.parametrize("text,expected", [
    ("apple-nvme\n" + "\x00" * 4085, "apple-nvme"),
    ("pcie\n\x00garbage after the NUL\n", "pcie"),
    ("\x00\x00 Supermicro\t\x00", "Supermicro"),
    ("  SAMSUNG MZ1L2960HCJR-00A07   \n", "SAMSUNG MZ1L2960HCJR-00A07"),
    ("\x00\x00\n", ""), ("", "")])
def test_cut_text(text, expected):
    assert cut_text(text) == expected
    assert parse_identity(text) == (expected or None)


def test_read_attr_cuts_at_the_first_nul(tmp_path):
    path = tmp_path / "transport"
    path.write_bytes(b"apple-nvme\n" + b"\x00" * 4085)
    assert read_attr(str(path)) == "apple-nvme"


def _expositions(root: str) -> str:
    sys = os.path.join(root, "sys")
    context = Context(roots=Roots(sysfs=sys, procfs=os.path.join(root, "proc"), dev=""), scheduler=Scheduler())
    exporter = StorpathExporter([NvmeCollector(context), PcieCollector(context), HostCollector(context)])
    text = generate_latest(exporter).decode()
    return "\n".join(line for line in text.splitlines()
                     if "_duration_seconds" not in line and "_collected_timestamp_seconds" not in line)


def _pad_text_files(folder: str) -> int:
    """Every text attribute directly in `folder`: its text, then NULs to TAR_PADDING bytes."""
    padded = 0
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path) or name == "config" or name.startswith("vpd_"):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if b"\x00" in data or len(data) >= TAR_PADDING:
            continue
        with open(path, "wb") as handle:
            handle.write(data + b"\x00" * (TAR_PADDING - len(data)))
        padded += 1
    return padded


def test_a_tree_copied_with_tar_padding_gives_the_same_labels(tmp_path):
    clean, padded = str(tmp_path / "clean"), str(tmp_path / "padded")
    machine = machines.load("epyc-7443-highpoint")
    machine.build(clean, "nps1")
    machine.build(padded, "nps1")
    sys = os.path.join(padded, "sys")
    count = 0
    for folder in ("class/nvme", "bus/pci/devices"):
        for entry in os.listdir(os.path.join(sys, folder)):
            count += _pad_text_files(os.path.realpath(os.path.join(sys, folder, entry)))
    count += _pad_text_files(os.path.realpath(os.path.join(sys, "class/dmi/id")))
    assert count > 100
    text = _expositions(padded)
    assert 'transport="pcie"' in text
    assert text == _expositions(clean)
    values = re.findall(r'="((?:[^"\\]|\\.)*)"', text)
    assert values and [v for v in values if "\\x00" in v or "\x00" in v or "\\n" in v or v != v.strip()] == []
