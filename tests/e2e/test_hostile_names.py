"""Names from firmware and the kernel that are hostile to what shows them
(tests.fixtures.builders_hostile): terminal controls in an NVMe model, the DMI product
name and an md member's name never reach the terminal as controls; a name whose bytes
are not UTF-8 costs that one value (shown as `\\xff`), never a collector, the landing
page or the command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, require_tool, run_exporter
from tests.fixtures import builders_hostile as hostile

ENV = {"PYTHONPATH": os.path.join(ROOT, "exporter")}
# md-degraded of the seed machine: a degraded mirror is a critical finding.
EXIT_DEGRADED = 2


@pytest.fixture(scope="module")
def escapes_tree(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("terminal-escapes"))
    hostile.terminal_escapes(root)
    return root


@pytest.fixture(scope="module")
def bytes_tree(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("undecodable-names"))
    hostile.undecodable_names(root)
    return root


def storpath(root, *args, env=None) -> subprocess.CompletedProcess:
    """The real command line, its output as bytes (what reaches the terminal)."""
    full = dict(os.environ, **ENV)
    for name in ("NO_COLOR", "COLUMNS", "PYTHONIOENCODING", "LC_ALL", "LANG"):
        full.pop(name, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "storpath", *args, f"--path.sysfs={root}/sys",
                           f"--path.procfs={root}/proc", f"--path.captured={root}/captured"],
                          capture_output=True, env=full, timeout=120)


# storpath's own colour: SGR sequences only (storpath.commands.check, storpath.report.tree.text).
_OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")
# What must not be in the output once storpath's colour is taken out: C0 controls but LF,
# DEL, C1 controls (U+009B is a CSI), bidi marks, embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize("args", [
    ("check",), ("check", "--color=always"), ("check", "--color=never"), ("check", "--ascii", "--color=always"),
    ("tree",), ("tree", "--color=always"), ("tree", "--ascii"), ("tree", "--ascii", "--color=always"),
    ("check", "--tree", "--color=never"),
], ids=" ".join)
def test_terminal_controls_from_hardware_are_shown_escaped(escapes_tree, args):
    result = storpath(escapes_tree, *args)
    assert result.returncode == EXIT_DEGRADED, result.stderr.decode()
    text = result.stdout.decode("utf-8")  # strict: a raw C1 byte would not decode
    colour = "--color=always" in args
    assert ("\x1b" in text) == colour  # storpath's own colour, and only when asked
    found = _CONTROLS.findall(_OWN_SGR.sub("", text))
    assert not found, found
    # Shown, and each value on one line: the CR and LF in the product name broke no line.
    assert "\\x1b]0;owned\\x07\\x1b[2J" in text
    assert any("RED\\x0dFAKE\\x0aLINE" in line for line in text.splitlines())
    assert not any(line.lstrip().startswith(("FAKE", "LINE")) for line in text.splitlines())
    assert "sd\\x1b[2J\\x07\\x0dz" in text  # the md member


def test_json_keeps_the_hardware_text_as_data(escapes_tree):
    """--json escapes controls as JSON does: a script gets the model exactly."""
    report = json.loads(storpath(escapes_tree, "check", "--json").stdout)
    assert report["host"]["product_name"] == hostile.PRODUCT
    assert any(hostile.MEMBER_ESCAPES in f["evidence"] for f in report["findings"])


def test_metrics_and_landing_page_with_a_name_that_is_not_utf8(bytes_tree, tmp_path):
    args = [f"--path.sysfs={bytes_tree}/sys", f"--path.procfs={bytes_tree}/proc",
            f"--path.captured={bytes_tree}/captured"]
    with run_exporter(args, str(tmp_path)) as exporter:
        response = exporter.get("/metrics")
        landing = exporter.get("/")
        log = exporter.log()
    assert response.status_code == 200, log
    text = response.content.decode("utf-8")  # strict: the body is valid UTF-8
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}

    def value(name, **labels):
        return samples.get((name, tuple(sorted(labels.items()))))

    for collector in ("md", "alignment", "inventory", "zfs", "block", "numa", "pcie"):
        assert value("storpath_scrape_collector_success", collector=collector) == 1, (collector, log)
    # The array, its degraded count and every member, the escaped one included.
    assert value("storpath_md_degraded_disks", device="md1") == 1
    assert value("storpath_md_member_info", device="md1", disk="sdh\\xff", member="sdh\\xff", slot="none",
                 state="faulty") == 1
    assert value("storpath_md_member_info", device="md1", disk="sda", member="sda", slot="0", state="in_sync") == 1
    assert value("storpath_md_member_numa_nodes", device="md0") == 1
    assert value("storpath_md_member_data_offset_bytes", array="md1", member="sdh\\xff") == 134217728
    assert value("storpath_block_device_info", address="0000:42:00.2", controller="ata3", device="sdh\\xff") == 1
    assert value("storpath_inventory_device_info", address="0000:42:00.2", device="sda", kind="sata_disk",
                 model="ATA Micron_5300_MTFD", serial="", slot="CPU1 SLOT4\\xff") == 1
    assert value("storpath_zfs_pool_state", state="online", zpool="tank\\xff") == 1
    assert landing.status_code == 200, log
    assert 'data-node="md1/sdh\\xff"' in landing.text


def test_exposition_with_a_name_that_is_not_utf8_passes_promtool(bytes_tree, tmp_path):
    promtool = require_tool("promtool", "prometheus")
    args = [f"--path.sysfs={bytes_tree}/sys", f"--path.procfs={bytes_tree}/proc",
            f"--path.captured={bytes_tree}/captured", "--web.disable-exporter-metrics"]
    with run_exporter(args, str(tmp_path)) as exporter:
        body = exporter.get("/metrics").content
    checked = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


@pytest.mark.parametrize("env", [
    {"PYTHONIOENCODING": "utf-8:strict"}, {"LANG": "C", "LC_ALL": "C"}, {"PYTHONIOENCODING": "ascii:strict"},
], ids=lambda env: " ".join(f"{k}={v}" for k, v in env.items()))
@pytest.mark.parametrize("command", [("tree",), ("check",), ("check", "--tree", "--color=always")], ids=" ".join)
def test_cli_with_a_name_that_is_not_utf8(bytes_tree, command, env):
    result = storpath(bytes_tree, *command, env=env)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == EXIT_DEGRADED and "Traceback" not in stderr, stderr
    text = result.stdout.decode("ascii" if "ascii" in env.get("PYTHONIOENCODING", "") else "utf-8")
    assert "sdh\\xff" in text and "md1" in text


def test_json_with_a_name_that_is_not_utf8(bytes_tree):
    """The name as labels show it; not a lone surrogate (`\\udcff`), which strict JSON parsers refuse."""
    result = storpath(bytes_tree, "check", "--json", env={"PYTHONIOENCODING": "utf-8:strict"})
    assert result.returncode == EXIT_DEGRADED, result.stderr.decode()
    assert b"\\udc" not in result.stdout
    report = json.loads(result.stdout)
    assert any("sdh\\xff" in f["evidence"] for f in report["findings"] if f["subject"] == "md1")
