"""A background task whose run raises (anything: a RecursionError from a parser
included) is that task's failure on the next scrape: its source fails with the reason
(its collector with it only where the collector's series need it), or the zpool task's
`storpath_zfs_zpool_up` is 0. Before, the exception was logged and
the scrape said success 1 with the results of the run before (or none at all). A run blocked
in a read past the server's bound fails its source the same way, reported blocked."""

from __future__ import annotations

import functools
import os
import re
import tempfile

import pytest
from prometheus_client import generate_latest

from storpath.base.background import Scheduler
from storpath.base.log import forget_once_keys
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


def test_a_task_blocked_in_a_read_fails_its_source_as_blocked_until_the_read_returns(tmp_path):
    """A run whose read of a counter does not return (an expander that stopped answering an
    SMP request: a FIFO nobody writes to here) is no pass: once that read has been outstanding
    longer than web.read_blocked_after, the source is served blocked (success 0, blocked 1,
    the file named once in the log) rather than the last pass's counters as current. When the
    read returns, the run goes on and its counters are served."""
    import threading
    import time

    b = machines.load("supermicro-x11ssh-sas3008").build(str(tmp_path), "healthy")
    fifo = os.path.realpath(f"{b.sys}/class/sas_phy/phy-0:0/invalid_dword_count")
    scheduler = Scheduler()
    collector = SasCollector(Context(roots=Roots(sysfs=b.sys), config=dict(SasCollector.config_defaults),
                                     scheduler=scheduler, full_config={"web": {"read_blocked_after": 0.3}}))
    exporter = StorpathExporter([collector], blocked_after=0.3)
    task = scheduler.tasks["sas-link-errors"]
    task.run_once()  # a pass, inline: its counters are served
    counter = 'storpath_sas_phy_invalid_dwords_total{phy="phy-0:0"}'
    first = generate_latest(exporter).decode()
    assert _value(first, counter) is not None and _value(first, 'storpath_scrape_source_blocked{source="sas_errors"}') == 0
    with open(fifo, "rb") as handle:
        held = handle.read()
    os.unlink(fifo)
    os.mkfifo(fifo)
    scheduler.start()  # every task runs at once: this one blocks opening the FIFO
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (task.thread_id and _waits_on(task.thread_id, fifo)):
            time.sleep(0.02)
        time.sleep(0.5)  # past the bound
        forget_once_keys()  # an earlier test's failure of the same source was said already
        with log_records("storpath") as records:
            blocked = [generate_latest(exporter).decode() for _ in range(2)]
        for text in blocked:
            assert _value(text, 'storpath_scrape_source_success{source="sas_errors"}') == 0
            assert _value(text, 'storpath_scrape_source_blocked{source="sas_errors"}') == 1
            assert _value(text, counter) is None  # the last pass is not served as current
            assert _value(text, 'storpath_scrape_collector_success{collector="sas"}') == 1  # the rates stay
        said = [str(getattr(r, "fields", "")) for r in records if "sas_errors" in str(getattr(r, "fields", ""))]
        assert len(said) == 1 and f"blocked reading {fifo}" in said[0], said
    finally:
        writer = threading.Thread(target=_write_fifo, args=(fifo, held))
        writer.start()
        writer.join(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and task.runs < 2:
        time.sleep(0.02)
    try:
        text = generate_latest(exporter).decode()
        assert _value(text, 'storpath_scrape_source_blocked{source="sas_errors"}') == 0
        assert _value(text, 'storpath_scrape_source_success{source="sas_errors"}') == 1
        assert _value(text, counter) == int(held)
    finally:
        exporter.close()
        scheduler.stop()


def _waits_on(thread_id: int, path: str) -> bool:
    from storpath.base.sysfs import outstanding

    reading = outstanding(thread_id)
    return reading is not None and os.path.realpath(reading[0]) == path


def _write_fifo(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:  # opens once the blocked reader is there: its read returns this
        handle.write(data)
