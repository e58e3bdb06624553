"""Identity strings (NVMe model, serial and firmware, DMI names, a SCSI disk's vendor and
model) reach label values without the padding around them: older kernels pad NVMe's fixed
fields with spaces, every sysfs attribute ends in a newline, and a copy of sysfs made with
tar can pad a file with NULs."""

import glob
import os
import re

import pytest
from prometheus_client import generate_latest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.host import HostCollector
from storpath.collectors.inventory import InventoryCollector
from storpath.collectors.nvme import NvmeCollector
from storpath.report.exporter import StorpathExporter
from storpath.base.parse import parse_identity
from storpath.base.roots import Roots
from tests.fixtures import machines


@pytest.mark.parametrize("text,expected", [
    ("SAMSUNG MZ1L2960HCJR-00A07              ", "SAMSUNG MZ1L2960HCJR-00A07"),
    ("  S64CNE0R812345 \n", "S64CNE0R812345"),
    ("ACV10031\n\x00\x00\x00\x00", "ACV10031"),
    ("\x00 Supermicro\t\x00", "Supermicro"),
    ("INTEL SSDPF2NV153TZ", "INTEL SSDPF2NV153TZ"),  # inside the string stays as it is
    ("\x00\x00 \n", None), ("", None), (None, None)])
def test_parse_identity(text, expected):
    assert parse_identity(text) == expected


def _pad(path, how):
    with open(path) as handle:
        value = handle.read().strip()
    with open(path, "w") as handle:
        handle.write(how(value))


def test_padded_identity_files_become_clean_labels(tmp_path):
    root = str(tmp_path)
    machines.load("epyc-7443-highpoint").build(root, "md-degraded")
    sys = os.path.join(root, "sys")
    files = (glob.glob(f"{sys}/class/nvme/*/model") + glob.glob(f"{sys}/class/nvme/*/serial")
             + glob.glob(f"{sys}/class/nvme/*/firmware_rev"))
    for path in files:
        _pad(path, lambda v: f"  {v}{' ' * 12}\n\x00\x00\x00\x00")
    dmi = glob.glob(f"{sys}/class/dmi/id/*")
    for path in dmi:
        _pad(path, lambda v: f"{v}\n\x00\x00\x00\x00\x00\x00")
    scsi = [p for name in ("vendor", "model") for p in glob.glob(f"{sys}/class/block/sd*/device/{name}")]
    for path in scsi:
        _pad(path, lambda v: f"{v}   \x00\x00")
    assert files and dmi and scsi
    roots = Roots(sysfs=sys, procfs=os.path.join(root, "proc"), dev="")
    context = Context(roots=roots, scheduler=Scheduler())
    text = generate_latest(StorpathExporter([NvmeCollector(context), HostCollector(context),
                                          InventoryCollector(context)])).decode()
    assert 'model="SAMSUNG MZ1L2960HCJR-00A07"' in text
    assert 'serial="S64CNE0R812345"' in text
    assert 'sys_vendor="Supermicro"' in text and 'product_name="AS -2024US-TRT"' in text
    assert 'kind="sata_disk"' in text and 'model="ATA Micron_5300_MTFD"' in text
    values = re.findall(r'="((?:[^"\\]|\\.)*)"', text)
    assert values and [v for v in values if v != v.strip(" \t\x00") or "\\n" in v or "\x00" in v] == []
