"""The noise corpus: healthy machines of many kinds must raise no alert, pending or firing, with
the shipped rules and their default thresholds, and `storpath check` must exit 0 on them.

Each machine (fixture machines of tests/fixtures/machines, each with a README of its story, and
the lab's real QEMU guest captures of tests/lab/captures) is served by the real `storpath
serve`; its exposition, scraped once, becomes the input series of a `promtool test rules` run
(Prometheus 2.42's own rule engine) that evaluates every shipped rule file every five minutes
over two days of that machine standing still (its series do not move, so a condition lasts for
the whole run or not at all: evaluating every minute, as deployed, took five times longer and
found nothing more), with the job and instance labels a scrape adds and
`up` 1. Prometheus records every pending and firing alert in the `ALERTS` series, so
`count_over_time(ALERTS[3d])` being empty at the end proves that nothing was ever pending or
firing. A machine deployed as the shipped DaemonSet and systemd unit are by default
(DEPLOYMENT = "unprivileged" in its machine.py: no NVMe Identify) may show the
NvmeIdentifyUnavailable notice during its first day only, and nothing else, ever.
Cost: about 10 s per machine (promtool 4 s of CPU, the exporter's start and scrape).

The bare-metal fault fixtures keep alerting as before: tests/rules and
tests/integration/test_alerts.py prove it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, require_tool, run_exporter
from tests.fixtures import machines

pytestmark = pytest.mark.promtool

RULES = [os.path.join(ROOT, "rules", f"{name}.yml")
         for name in ("storpath", "pcie", "nvme", "sas_sata", "numa", "md", "zfs", "probes", "paths")]
CAPTURES = os.path.join(ROOT, "tests", "lab", "captures")

# Healthy fixture machines: the virtual and small machines built for this corpus, and the
# bare-metal fixtures' healthy states.
FIXTURES = [
    ("qemu-q35-old-passthrough", "healthy"),
    ("qemu-q35-new-rciep", "healthy"),
    ("vmware-esxi-nas", "healthy"),
    ("cloud-nitro-instance", "healthy"),
    ("laptop-thinkpad-x1", "healthy"),
    ("desktop-z690-single-socket", "healthy"),
    ("supermicro-x10dri-hyperm2", "healthy"),
    ("intel-r2224wft-switches", "healthy"),
    ("dell-r900-sas1068e", "after-fix"),
    ("dell-r750-nvmeof", "healthy"),
    ("supermicro-dualport-sas-shelf", "healthy"),
]
# The lab's real QEMU 7.2 guests (tests/lab/captures/SPELLINGS.md): a 2-vNUMA q35 guest whose
# emulated NVMe drives sit behind root ports of 16, 8 and 8 GT/s with every device at NUMA node
# -1 or 1. Each capture was staged with faults: QEMU's NVMe namespaces left at 512 B though
# 4 KiB is as good (all but one), a failed md member and an array recovering at a throttled
# rate (frozen in the capture: stalled), SATA links held by libata.force. Those alerts, and only
# those, are expected: nothing about PCIe links or NUMA placement, which a guest cannot judge.
LAB = {
    "nvme": {"NvmeNamespaceLbaFormatNotBest"},
    "md": {"MdArrayDegraded", "MdMemberFaulty", "MdSyncStalled", "NvmeNamespaceLbaFormatNotBest"},
    "sas": {"SataLinkBelowHardwareLimit"},
}

DAYS = 2
SCRAPE = "5m"
SAMPLES = DAYS * 24 * 12


def _series(exposition: str, instance: str):
    """`input_series` of a promtool test: every sample of the exposition, unchanged for DAYS."""
    series = [{"series": f'up{{job="storpath",instance="{instance}"}}', "values": f"1x{SAMPLES}"}]
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if math.isnan(sample.value):
                continue
            labels = dict(sample.labels, job="storpath", instance=instance)
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            series.append({"series": f"{sample.name}{{{text}}}", "values": f"{sample.value!r}x{SAMPLES}"})
    return series


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _alerts_ever(exposition: str, tmp_path, allowed=frozenset(), quiet_after: str = ""):
    """Run the shipped rules over the machine; return promtool's complaint ('' when silent)."""
    promtool = require_tool("promtool", "prometheus")
    others = "".join(f',alertname!="{name}"' for name in sorted(allowed))
    tests = [{"expr": f"count_over_time(ALERTS{{{others[1:]}}}[{DAYS}d])", "eval_time": f"{DAYS}d", "exp_samples": []}]
    if quiet_after:  # the allowed alerts, too, are gone after this
        tests.append({"expr": f"count_over_time(ALERTS[{quiet_after}])", "eval_time": f"{DAYS}d", "exp_samples": []})
    document = {
        "rule_files": RULES,
        "evaluation_interval": SCRAPE,
        "tests": [{"name": "noise corpus", "interval": SCRAPE, "input_series": _series(exposition, "corpus:9866"),
                   "promql_expr_test": tests}],
    }
    path = tmp_path / "corpus.test.yml"
    path.write_text(yaml.safe_dump(document, width=100000))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=600)
    return "" if result.returncode == 0 else result.stdout + result.stderr


def _check(root_args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter"))
    return subprocess.run([sys.executable, "-m", "storpath", "check", *root_args], capture_output=True, text=True,
                          env=env, timeout=120)


def _serve(root_args, tmp_path) -> str:
    with run_exporter(list(root_args), str(tmp_path)) as exporter:
        text = exporter.metrics()
        log = exporter.log()
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text, log
    assert "collector failed" not in log, log
    return text


@pytest.mark.parametrize("name,variant", FIXTURES, ids=[f"{n}:{v}" for n, v in FIXTURES])
def test_healthy_machine_raises_no_alert(name, variant, machine_tree, tmp_path):
    machine = machines.load(name)
    root = machine_tree(name, variant)
    unprivileged = getattr(machine.modules[0], "DEPLOYMENT", "") == "unprivileged"
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc"]
    if not unprivileged:
        args.append(f"--path.captured={root}/captured")
    else:
        args.append(f"--path.captured={tmp_path}/no-identify")  # as without CAP_SYS_ADMIN: nothing readable
    exposition = _serve(args, tmp_path)
    if unprivileged:
        assert 'storpath_nvme_identify_available{controller="nvme0"} 0.0' in exposition
        complaint = _alerts_ever(exposition, tmp_path, allowed={"NvmeIdentifyUnavailable"}, quiet_after="22h")
    else:
        complaint = _alerts_ever(exposition, tmp_path)
    assert complaint == "", f"{name}:{variant} raised alerts:\n{complaint}"
    check = _check([f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"])
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("capture", sorted(LAB))
def test_lab_guest_raises_only_its_staged_faults(capture, tmp_path):
    root = tmp_path / capture
    with tarfile.open(os.path.join(CAPTURES, f"{capture}.tar.gz")) as tar:
        tar.extractall(root)
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]
    exposition = _serve(args, tmp_path)
    assert 'virtualization="vm"' in exposition  # told from the guest's cpuinfo: the captures have no DMI
    complaint = _alerts_ever(exposition, tmp_path, allowed=LAB[capture])
    assert complaint == "", f"lab capture {capture} raised alerts beyond its staged faults:\n{complaint}"
    check = _check([*args, "--json"])
    guest_noise = [f for f in json.loads(check.stdout)["findings"]
                   if f["subsystem"] in ("pcie", "numa") and f["severity"] != "info"]
    assert guest_noise == []


def test_the_corpus_can_fail(machine_tree, tmp_path):
    """The same run does see a fault: a passed-through drive whose own registers show x2."""
    root = machine_tree("qemu-q35-new-rciep", "x2-passthrough")
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]
    complaint = _alerts_ever(_serve(args, tmp_path), tmp_path)
    assert 'alertname="PcieLinkWidthBelowExpected"' in complaint and 'address="0000:01:00.0"' in complaint
    assert "PcieDeviceLimitedByPort" not in complaint
    assert _check(args).returncode == 1  # a warning, as the alert is
