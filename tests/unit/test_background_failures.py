"""A background task whose run raises (anything: a RecursionError from a parser
included) is that task's failure on the next scrape: its source fails with the reason
(its collector with it only where the collector's series need it), or the zpool task's
`storpath_zfs_zpool_up` is 0. Before, the exception was logged and
the scrape said success 1 with the results of the run before (or none at all)."""

from __future__ import annotations

import functools
import re
import tempfile

import pytest
from prometheus_client import generate_latest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.nvme import NvmeCollector
from storpath.collectors.nvme_health import NvmeHealthCollector
from storpath.collectors.probes import ProbesCollector
from storpath.collectors.sas import SasCollector
from storpath.collectors.zfs import ZfsCollector
from storpath.report.exporter import StorpathExporter
from storpath.base.roots import Roots
from tests.conftest import log_records
from tests.fixtures import machines


@functools.lru_cache(maxsize=None)
def _roots(machine: str, variant: str = "healthy") -> Roots:
    root = tempfile.mkdtemp()
    machines.load(machine).build(root, variant)
    return Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc", captured=f"{root}/captured")


def _value(text: str, series: str):
    match = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def _raise(*_):
    raise RecursionError("maximum recursion depth exceeded while decoding a JSON object")


def _scrape(collector) -> str:
    return generate_latest(StorpathExporter([collector])).decode()


def _probes_config(tmp_path, monkeypatch):
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    return {"probes": {"state_file": str(tmp_path / "probes.json"), "jitter": 0,
                       "targets": [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}]}}


CASES = [
    # collector, machine, the task made to raise, the source that serves it
    (NvmeCollector, "am4-x570-firecuda", "nvme-identify", "nvme_identify"),
    (NvmeHealthCollector, "am4-x570-firecuda", "nvme-smart", "nvme_smart"),
    (SasCollector, "supermicro-x11ssh-sas3008", "sas-link-errors", "sas_errors"),
    (SasCollector, "supermicro-x11ssh-sas3008", "sas-drive-phys", "sas_drive_phys"),
    (ProbesCollector, "am4-x570-firecuda", "probe:", "probes"),
]


@pytest.mark.parametrize("cls,machine,task,source", CASES, ids=[c[2] for c in CASES])
def test_a_task_that_raises_fails_its_source_with_the_reason(cls, machine, task, source, tmp_path, monkeypatch):
    full = _probes_config(tmp_path, monkeypatch) if cls is ProbesCollector else {}
    scheduler = Scheduler()
    collector = cls(Context(roots=_roots(machine), config=dict(cls.config_defaults), scheduler=scheduler,
                            full_config=full))
    name = next(n for n in scheduler.tasks if n.startswith(task))
    scheduler.tasks[name].func = _raise
    with log_records("storpath") as records:
        scheduler.tasks[name].run_once()
        text = _scrape(collector)
    assert _value(text, f'storpath_scrape_source_success{{source="{source}"}}') == 0
    # A task whose results the collector's series need fails the collector; one that only
    # enriches them (Identify, SMART, SAS error counters, drives' PHYs) leaves out its rows and
    # the collector goes on serving the rest (sysfs' namespaces, hwmon temperatures, PHY rates).
    needed = source in collector.reads
    assert source in collector.reads + collector.enriches
    assert _value(text, f'storpath_scrape_collector_success{{collector="{collector.name}"}}') == (0 if needed else 1)
    if not needed:
        assert any(line.startswith(collector.families[0].sample_name) for line in text.splitlines()), text[:2000]
    logged = " ".join(r.getMessage() + str(getattr(r, "fields", "")) for r in records)
    assert f"background task {name} failed: RecursionError" in logged
    # The next run that returns is a success again.
    scheduler.tasks[name].func = lambda: None
    scheduler.tasks[name].run_once()
    assert _value(_scrape(collector), f'storpath_scrape_source_success{{source="{source}"}}') == 1


def test_a_zpool_task_that_raises_is_zpool_up_0_and_the_pool_states_stay():
    machine = "intel-r2224wft-switches"
    scheduler = Scheduler()
    collector = ZfsCollector(Context(roots=_roots(machine, "zfs-degraded"), config=dict(ZfsCollector.config_defaults),
                                     scheduler=scheduler))
    scheduler.run_all_once()
    assert _value(_scrape(collector), "storpath_zfs_zpool_up") == 1
    scheduler.tasks["zpool"].func = _raise
    scheduler.run_all_once()
    text = _scrape(collector)
    assert _value(text, "storpath_zfs_zpool_up") == 0
    assert _value(text, 'storpath_zfs_pool_state{state="degraded",zpool="zpool1"}') == 1  # from kstat
    assert "storpath_zfs_vdev_state{" not in text  # the details of the pass before are not served as current
    assert _value(text, 'storpath_scrape_collector_success{collector="zfs"}') == 1


def test_a_controller_states_task_that_raises_leaves_the_scrape_reading_the_states(tmp_path):
    """The local NVMe drives' states are read by a task only to spare the scrape: when it
    fails (logged), each scrape reads them itself, as before the task's first pass."""
    from storpath.collectors.nvme_subsystem import NvmeSubsystemCollector

    b = machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    scheduler = Scheduler()
    collector = NvmeSubsystemCollector(Context(roots=Roots(sysfs=b.sys), scheduler=scheduler,
                                               config=dict(NvmeSubsystemCollector.config_defaults)))
    task = scheduler.tasks["nvme-controller-states"]
    task.run_once()
    assert "storpath_nvme_subsystem_paths_live" not in _scrape(collector)  # the local drives, all live
    task.func = _raise
    with log_records("storpath") as records:
        task.run_once()
        with open(f"{b.sys}/class/nvme/nvme1/state", "w") as state:
            state.write("dead\n")
        text = _scrape(collector)
    assert [r.getMessage() for r in records if r.levelname == "ERROR"] == ["background task failed"]
    assert _value(text, 'storpath_scrape_source_success{source="nvme_subsystems"}') == 1
    assert _value(text, 'storpath_nvme_subsystem_paths_live{subsystem="nvme-subsys1"}') == 0
