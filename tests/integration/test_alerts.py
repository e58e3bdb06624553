"""The rules of rules/ end to end: the exporter on a fixture machine with a fault, a real
Prometheus loaded with the rules scraping it, a real Alertmanager receiving from Prometheus.
The alerts the fault must raise arrive at Alertmanager (its API v2) with the right labels and
annotations, and nothing else fires; the healthy machines raise nothing. The expectations come
from each fixture machine's README (its story), not from running the rules.

The rules are rendered by rules/generate.py with every `for:` removed (`--for 0s`) and
Prometheus scrapes and evaluates every second, so an alert fires on the first evaluation
that sees the fault. Back end (local processes or containers) from STORPATH_IT_MODE, see
tests/integration/conftest.py; the exporter runs as a host process in both.
"""

from __future__ import annotations

import importlib.util
import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from . import harness

pytestmark = pytest.mark.integration

RULES = harness.REPO / "rules"
RUNBOOKS = harness.REPO / "docs" / "runbooks"

# The FireCuda 530 drives of am4-x570-firecuda ship at 512-byte LBAs with 4 KiB "Best"
# (see its README): every variant of that machine raises this for each of the four namespaces.
FIRECUDA_LBA = {
    ("NvmeNamespaceLbaFormatNotBest", f"nvme{n}n1"): {
        "labels": {"severity": "warning", "device": f"nvme{n}n1", "controller": f"nvme{n}", "nsid": "1"},
        "description": [f"Seagate FireCuda 530 ZP2000GM30023 at {address}",
                        "formatted with 512-byte logical blocks, but the drive's best format uses 4096-byte blocks",
                        "ERASES the namespace"],
    }
    for n, address in enumerate(["0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"])
}



def _below_peers(address: str) -> dict:
    """The fleet outlier rule (rules/fleet.yml) in one site: the one slow FireCuda of the four
    carries half its siblings' median link bandwidth."""
    return {("NvmeLinkBandwidthBelowModelPeers", address): {
        "labels": {"severity": "info", "address": address},
        "description": ["3.94 GB/s per direction, 50% of the median of its siblings", "over 4 drives"],
    }}


# (machine, variant) -> {(alertname, address or device): expected labels and description parts}.
CASES = {
    ("am4-x570-firecuda", "gen3-port"): {
        ("PcieDeviceLimitedByPort", "0000:07:00.0"): {
            "labels": {"severity": "info", "address": "0000:07:00.0", "upstream": "0000:00:03.4",
                       "class": "0x010802", "driver": "nvme"},
            "description": ["0000:07:00.0 (nvme, class 0x010802) below port 0000:00:03.4",
                            "supports 16 GT/s x4 but its port only allows 8 GT/s x4",
                            "limited to 3.94 GB/s per direction"],
        },
        **FIRECUDA_LBA,
        **_below_peers("0000:07:00.0"),
    },
    ("am4-x570-firecuda", "x2-link"): {
        ("PcieLinkWidthBelowExpected", "0000:05:00.0"): {
            "labels": {"severity": "warning", "address": "0000:05:00.0", "upstream": "0000:00:03.2",
                       "class": "0x010802", "driver": "nvme"},
            "description": ["trained at x2 though both ends support x4",
                            "it carries 3.94 GB/s per direction instead of 7.88 GB/s"],
        },
        **FIRECUDA_LBA,
        **_below_peers("0000:05:00.0"),
    },
    ("am4-x570-firecuda", "gen3-trained"): {
        ("PcieLinkSpeedBelowExpected", "0000:06:00.0"): {
            "labels": {"severity": "warning", "address": "0000:06:00.0", "upstream": "0000:00:03.3",
                       "class": "0x010802", "driver": "nvme"},
            "description": ["trained at 8 GT/s though both ends support 16 GT/s",
                            "it carries 3.94 GB/s per direction instead of 7.88 GB/s"],
        },
        # The AER counters of this variant are high but do not rise while Prometheus watches:
        # no AER alert.
        **FIRECUDA_LBA,
        **_below_peers("0000:06:00.0"),
    },
    ("am4-x570-firecuda", "sata-slowed"): {
        ("SataLinkBelowHardwareLimit", "sda"): {
            "labels": {"severity": "warning", "link": "link1", "device": "sda"},
            "description": ["SATA link link1 (sda) runs at 3 Gbit/s", "libata's current limit is 3 Gbit/s",
                            "the port's hardware limit is not set", "the drive does 6 Gbit/s"],
        },
        **FIRECUDA_LBA,
    },
    # The backplane step-down: eight PHYs at 1.5 Gbit though PHYs and SSDs do 3.0, and fixed.
    ("dell-r900-sas1068e", "before-fix"): {
        ("SasPhyNegotiatedAtLoweredMinimum", f"phy-0:{n}"): {
            "labels": {"severity": "warning", "phy": f"phy-0:{n}"},
            "description": [f"PHY phy-0:{n} (sd{'abcdefgh'[n]}) negotiated 1.5 Gbit/s",
                            "though it can do 3 Gbit/s"],
        }
        for n in range(8)
    },
    ("dell-r900-sas1068e", "after-fix"): {},
    # zpool1 raidz2 with one drive removed. The captured zpool output is from a past date, so both
    # pools' last scrub is more than 38 days old by now: ZfsScrubOverdue fires as well.
    ("intel-r2224wft-switches", "zfs-degraded"): {
        ("ZfsPoolNotOnline", "zpool1"): {
            "labels": {"severity": "critical", "zpool": "zpool1", "state": "degraded"},
            "description": ["Pool zpool1 is DEGRADED"],
        },
        ("ZfsVdevNotOnline", "zpool1/raidz2-0"): {
            "labels": {"severity": "warning", "zpool": "zpool1", "vdev": "raidz2-0", "state": "degraded"},
            "description": ["vdev raidz2-0 of pool zpool1 is DEGRADED"],
        },
        ("ZfsVdevNotOnline", "zpool1/nvme5n1"): {
            "labels": {"severity": "warning", "zpool": "zpool1", "vdev": "nvme5n1", "state": "removed"},
            "description": ["vdev nvme5n1 of pool zpool1 is REMOVED"],
        },
        ("ZfsScrubOverdue", "zpool1"): {"labels": {"severity": "warning", "zpool": "zpool1"},
                                        "description": ["Pool zpool1 finished its last scrub"]},
        ("ZfsScrubOverdue", "zpool2"): {"labels": {"severity": "warning", "zpool": "zpool2"},
                                        "description": ["Pool zpool2 finished its last scrub"]},
    },
    # Drive 2 on the carrier without its heatsink cover: above its warning threshold. Its
    # throttle counters are high but do not rise while Prometheus watches: no throttling alert.
    ("am4-x570-firecuda", "hot-drive"): {
        ("NvmeTemperatureAboveWarning", "nvme1"): {
            "labels": {"severity": "warning", "controller": "nvme1", "sensor": "composite"},
            "description": ["nvme1 (Seagate FireCuda 530 ZP2000GM30023 at 0000:05:00.0) is at 83.8 °C",
                            "warning threshold (81.8 °C WCTEMP)"],
        },
        **FIRECUDA_LBA,
    },
    # sda1 at sector 63 of a 512e disk; sdb1 at 1 MiB. The zpool output is old: scrubs overdue.
    ("intel-r2224wft-switches", "misaligned-partition"): {
        ("BlockPartitionMisaligned", "sda1"): {
            "labels": {"severity": "warning", "device": "sda1", "disk": "sda", "boundary": "physical_block"},
            "description": ["sda1 starts at byte 32256 of sda", "the disk must read, modify and write"],
        },
        ("ZfsScrubOverdue", "zpool1"): {"labels": {"severity": "warning", "zpool": "zpool1"},
                                        "description": ["Pool zpool1 finished its last scrub"]},
        ("ZfsScrubOverdue", "zpool2"): {"labels": {"severity": "warning", "zpool": "zpool2"},
                                        "description": ["Pool zpool2 finished its last scrub"]},
    },
    ("supermicro-x10dri-hyperm2", "healthy"): {},
    # PERC H730P: battery failed, both volumes fell to write-through, VD 0/0 rebuilding drive 32:3,
    # SSD 32:9 at 3.0 Gb/s though it does 6.0 and the controller's SAS-12G ports 12.
    ("dell-r730xd-perc-h730p", "degraded-writethrough"): {
        ("RaidDriveLinkBelowExpected", "storcli/c0 32:9"): {
            "labels": {"severity": "warning", "controller": "storcli/c0", "slot": "32:9"},
            "description": ["Drive 32:9 (MZ7KM1T9HMJP0D3) on storcli/c0 runs at 3 Gbit/s though the drive does "
                            "6 Gbit/s and the controller's ports 12 Gbit/s (expected 6 Gbit/s)"],
        },
        ("RaidVolumeRebuilding", "storcli/c0 volume 0/0"): {
            "labels": {"severity": "warning", "controller": "storcli/c0", "volume": "0/0", "state": "rebuilding"},
            "description": ["Volume 0/0 (sda) (raid6) on storcli/c0 is rebuilding (11% done)"],
        },
        **{("RaidCacheFellToWriteThrough", f"storcli/c0 volume {volume}"): {
            "labels": {"severity": "warning", "controller": "storcli/c0", "volume": volume},
            "description": [f"Volume {volume} ({device}) on storcli/c0 is configured write-back but writes through"],
        } for volume, device in (("0/0", "sda"), ("1/1", "sdb"))},
        ("RaidBatteryFailed", "storcli/c0"): {
            "labels": {"severity": "warning", "controller": "storcli/c0", "state": "failed"},
            "description": ["The cache battery (or CacheVault) of storcli/c0 is failed"],
        },
    },
    ("dell-r730xd-perc-h730p", "healthy"): {},
    # Smart Array P410i with a failed battery (cache "Temporarily Disabled"); the P212's MSA60 shelf at
    # 1.5 Gbit/s has no known drive and controller capability together: unverifiable, no alert.
    ("hpe-dl380g7-p212-msa60", "as-found"): {
        ("RaidBatteryFailed", "ssacli/slot0"): {
            "labels": {"severity": "warning", "controller": "ssacli/slot0", "state": "failed"},
            "description": ["The cache battery (or CacheVault) of ssacli/slot0 is failed"],
        },
        ("RaidCacheFellToWriteThrough", "ssacli/slot0 volume 1"): {
            "labels": {"severity": "warning", "controller": "ssacli/slot0", "volume": "1"},
            "description": ["Volume 1 (sda) on ssacli/slot0 is configured write-back but writes through now"],
        },
    },
    # ServeRAID M5015 (SAS-6G): a drive offline, the RAID 6 degraded; its 12 Gb/s SAS drives at 6.0 are the
    # controller's limit and raise nothing.
    ("ibm-x3650m3-serveraid-m5015", "degraded"): {
        ("RaidVolumeDegraded", "storcli/c0 volume 0/0"): {
            "labels": {"severity": "critical", "controller": "storcli/c0", "volume": "0/0", "state": "degraded"},
            "description": ["Volume 0/0 (sda) (raid6) on storcli/c0 is degraded"],
        },
    },
    # 29 SATA drives behind expanders at storcli "Link Speed" 12.0 / "Device Speed" 6.0: silent.
    ("supermicro-hba9500-expanders", "healthy"): {},
}


def _generator():
    spec = importlib.util.spec_from_file_location("storpath_rules_generate", RULES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_rules(rules_dir) -> None:
    """The shipped rules with every `for:` at 0 and the capacity group (every 5 m in production)
    evaluated as often as the rest, so every rule has run within seconds."""
    generate = _generator()
    config = generate.load_config()
    config["capacity"]["evaluation_interval"] = "1s"
    generate.write(str(rules_dir), config=config, for_override="0s")


def _summaries() -> dict:
    """alertname -> its static summary, from the rule files Prometheus loads."""
    import yaml

    out = {}
    for path in RULES.glob("*.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    out[rule["alert"]] = rule["annotations"]["summary"]
    return out


def _evaluations(prometheus) -> dict:
    """Rule group name -> (when its last evaluation began, as a Unix time; seconds it took)."""
    return {g["name"]: (datetime.fromisoformat(g["lastEvaluation"]).timestamp(), g["evaluationTime"])
            for g in prometheus.get_json("/api/v1/rules")["data"]["groups"]}


def _key(alert: dict) -> tuple:
    """(alertname, the thing it is about): a PCI address, block device, PHY, pool or pool/vdev."""
    labels = alert["labels"]
    if "controller" in labels and "slot" in labels:  # a drive behind a RAID controller
        return labels["alertname"], f"{labels['controller']} {labels['slot']}"
    if "controller" in labels and "volume" in labels:
        return labels["alertname"], f"{labels['controller']} volume {labels['volume']}"
    if "vdev" in labels:
        return labels["alertname"], f"{labels['zpool']}/{labels['vdev']}"
    for name in ("address", "device", "phy", "zpool", "target", "collector", "controller"):
        if name in labels:
            return labels["alertname"], labels[name]
    return labels["alertname"], labels.get("instance", "")


@pytest.mark.parametrize("machine,variant", list(CASES), ids=[f"{m}-{v}" for m, v in CASES])
def test_fault_reaches_alertmanager(machine, variant, backend, exporter_on, tmp_path):
    expected = CASES[(machine, variant)]
    rules_dir = tmp_path / "rules"
    write_rules(rules_dir)

    with exporter_on(machine, variant) as exporter:
        alertmanager = backend.alertmanager()
        target = f"127.0.0.1:{exporter.port}"
        config = harness.prometheus_config({"storpath": [target]}, alertmanagers=[alertmanager.address],
                                           interval="1s", evaluation_interval="1s")
        prometheus = backend.prometheus(config, rules_dir=rules_dir)
        prometheus.wait_targets_up(["storpath"], timeout=60)
        # With every `for:` at 0, an evaluation before the first scrape fires StorpathTargetAbsent
        # (no `up` yet): the verdict below counts only evaluations that began after this.
        scraped_at = time.time()

        def diagnostics() -> str:
            return (f"prometheus alerts: {json.dumps(prometheus.alerts(), indent=1)[:4000]}\n"
                    f"rule groups (last evaluation, seconds it took): {_evaluations(prometheus)}\n"
                    f"{prometheus.logs()}\n{alertmanager.logs()}\n{exporter.log()[-3000:]}")

        # Every rule file loaded and healthy, and Prometheus talks to this Alertmanager:
        # without these an empty answer would prove nothing.
        groups = prometheus.get_json("/api/v1/rules")["data"]["groups"]
        assert sorted(g["name"] for g in groups) == sorted(
            f"storpath-{n.replace('_', '-')}" for n in _generator().SUBSYSTEMS)
        harness.wait_until(
            lambda: any(alertmanager.address in am["url"]
                        for am in prometheus.get_json("/api/v1/alertmanagers")["data"]["activeAlertmanagers"]),
            30, "Prometheus to discover the Alertmanager", diagnostics=diagnostics)

        if expected:
            harness.wait_until(lambda: set(expected) <= {_key(a) for a in alertmanager.alerts()}, 90,
                               f"{sorted(expected)} in Alertmanager", interval=0.5, diagnostics=diagnostics)

        # Let the rules run on several scrapes, so an alert that should not fire has had its chance,
        # and every group evaluate twice on scraped data, so one that fired before it is resolved.
        harness.wait_until(
            lambda: all(float(s["value"][1]) >= 5 for s in prometheus.query(
                "count_over_time(instance:storpath_pcie_links_below_expected:count[1m])")) and
            prometheus.query("count_over_time(instance:storpath_pcie_links_below_expected:count[1m])") and
            min(at for at, _ in _evaluations(prometheus).values()) >= scraped_at + 2,
            60, "five rule evaluations on scraped data", diagnostics=diagnostics)
        for rule_group in prometheus.get_json("/api/v1/rules")["data"]["groups"]:
            for rule in rule_group["rules"]:
                assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"

        firing = {_key(a) for a in prometheus.alerts() if a["state"] == "firing"}
        assert firing == set(expected), diagnostics()
        # Alertmanager hears of a resolution on Prometheus' next send: allow it that long.
        def received_exactly():
            got = {_key(a): a for a in alertmanager.alerts()}
            return (got,) if set(got) == set(expected) else None

        (received,) = harness.wait_until(received_exactly, 15, f"Alertmanager to hold exactly {sorted(expected)}",
                                         diagnostics=diagnostics)

        summaries = _summaries()
        for key, want in expected.items():
            alert = received[key]
            labels, annotations = alert["labels"], alert["annotations"]
            assert labels["job"] == "storpath" and labels["instance"] == target, labels
            for name, value in want["labels"].items():
                assert labels.get(name) == value, (key, name, labels)
            assert annotations["summary"] == summaries[key[0]]
            for part in want["description"]:
                assert part in annotations["description"], (key, part, annotations["description"])
            assert "{{" not in annotations["description"] and "<no value>" not in annotations["description"]
            # the default runbook_url: the runbook as the exporter that raised the alert serves it
            assert annotations["runbook_url"] == f"http://{target}/runbooks/{key[0]}.md", annotations
            status, body = harness.http_get(annotations["runbook_url"])
            assert status == 200 and body == (RUNBOOKS / f"{key[0]}.md").read_text(), (key, status)
            assert alert["status"]["state"] == "active"
