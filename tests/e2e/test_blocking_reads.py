"""The real `storpath serve` on a fixture machine where one file blocks every read (a FIFO
nobody writes to, as an attribute of a device that stopped answering does): each scrape
still answers within its deadline, the source is called blocked once that read has been
outstanding past --web.read-blocked-after (the server's bound, 1 s here), only the
collectors that need the blocked source fail (an enrichment such as md's PCI paths is left
out, not the collector), each failure is logged once, and SIGTERM still stops the process.

What is expected to fail is derived from the exporter itself: the sources that read the
blocked file (named per case), every source that needs one of them, and every collector
whose `reads` names one of those. What is expected to be served is the machine's golden
exposition, less the families of the failing collectors.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import pytest

from tests.conftest import run_exporter
from tests.e2e.test_golden import normalise
from tests.fixtures import machines

DEADLINE = {"X-Prometheus-Scrape-Timeout-Seconds": "3"}
BLOCKED_AFTER = "1s"  # --web.read-blocked-after: the bound a read must overrun to be called blocked
SCRAPE_WALL = 3.0  # the 3 s client deadline: the blocked read is given up after 1 s
# Series that only enrich a collector's rows from another source: left out, not the collector,
# when that source fails (collectors' `enriches`).
ENRICHMENTS = {"storpath_md_member_numa_nodes": ("pci", "blocks")}
SCRAPES = 3
STOP_WITHIN = 5.0


@dataclass(frozen=True)
class Case:
    id: str
    machine: str
    variant: str
    file: str  # relative to the tree's root: replaced by a FIFO (symlinks in it are followed)
    sources: Tuple[str, ...]  # the sources that read the file, so block on it
    # Collectors that must be among those derived to fail: a floor that does not come from
    # the exporter's own tables, should they go wrong.
    at_least: Tuple[str, ...]

    def locate(self, root: str) -> str:
        path = os.path.realpath(os.path.join(root, self.file))
        assert path.startswith(root + os.sep) and os.path.isfile(path), path
        return path


CASES = [
    Case("pci-current-link-speed", "am4-x570-firecuda", "healthy",
         "sys/class/nvme/nvme0/device/current_link_speed", ("pci",), ("pcie", "numa", "inventory")),
    # md state never waits on the PCI tree: MdArrayDegraded must still be able to fire.
    Case("pci-beside-a-degraded-md-array", "epyc-7443-highpoint", "md-degraded",
         "sys/class/nvme/nvme0/device/current_link_speed", ("pci",), ("pcie", "numa")),
    Case("nvme-namespace-logical-block-size", "am4-x570-firecuda", "healthy",
         "sys/class/block/nvme0n1/queue/logical_block_size", ("nvme_namespaces",), ("nvme",)),
    Case("nvme-hwmon-temperature", "am4-x570-firecuda", "healthy",
         "sys/class/nvme/nvme0/hwmon1/temp1_input", ("hwmon",), ("nvme_health",)),
    Case("md-array-state", "epyc-7443-highpoint", "md-degraded", "sys/block/md0/md/array_state", ("md",), ("md",)),
    Case("proc-mdstat", "epyc-7443-highpoint", "md-degraded", "proc/mdstat", ("md",), ("md",)),
]


@dataclass(frozen=True)
class Expected:
    sources: Dict[str, bool]  # every source the exporter reads -> whether it is read (success 1)
    collectors: Dict[str, bool]  # every enabled collector -> whether it succeeds
    families: Dict[str, str]  # sample name -> the collector whose family it is


def _expected(root: str, blocked: Tuple[str, ...]) -> Expected:
    """What `storpath serve` with its default collectors should report when the sources
    `blocked` block: built from the collectors' `reads` and the sources' `needs`."""
    from storpath.base.background import Scheduler
    from storpath.report.exporter import build_collectors
    from storpath.base.roots import Roots
    from storpath.scrape.snapshot import needed, sysfs_sources

    roots = Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"),
                  captured=os.path.join(root, "captured"))
    collectors = build_collectors(roots, {}, Scheduler())  # never started: nothing runs
    try:
        table = sysfs_sources(roots)
        for collector in collectors:
            table.update({s.name: s for s in collector.sources()})
        read = needed(table, [name for c in collectors for name in c.reads + c.enriches])
        assert set(blocked) <= {s.name for s in read}, blocked
        failing: Set[str] = set(blocked)
        for source in read:  # each after the sources it needs
            if any(need in failing for need in source.needs):
                failing.add(source.name)
        families = {}
        for collector in collectors:
            for family in collector.families:
                families[family.sample_name] = collector.name
        return Expected(sources={s.name: s.name not in failing for s in read},
                        collectors={c.name: not (set(c.reads) & failing) for c in collectors},
                        families=families)
    finally:
        for collector in collectors:
            close = getattr(collector, "close", None)
            if close is not None:
                close()


def _blocking_tree(case: Case, machine_tree, tmp_path) -> Tuple[str, str, bytes]:
    """A copy of the case's fixture machine with its file replaced by a FIFO: (root, FIFO,
    what the file held)."""
    root = str(tmp_path / "host")
    shutil.copytree(machine_tree(case.machine, case.variant), root, symlinks=True)
    path = case.locate(root)
    with open(path, "rb") as handle:
        content = handle.read()
    os.unlink(path)
    os.mkfifo(path)
    return root, path, content


def _start(root: str, tmp_path):
    return run_exporter([f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
                         "--web.disable-exporter-metrics", f"--web.read-blocked-after={BLOCKED_AFTER}"], str(tmp_path))


def _gauges(text: str, family: str, label: str) -> Dict[str, str]:
    pattern = re.compile(rf'^{family}\{{{label}="([^"]+)"\}} (\S+)$', re.M)
    return {name: value for name, value in pattern.findall(text)}


def _sample_name(line: str) -> str:
    return re.split(r"[{ ]", line, maxsplit=1)[0]


def _golden_lines(case: Case) -> List[str]:
    with open(machines.load(case.machine).golden(case.variant)) as handle:
        return [line for line in handle.read().splitlines() if line and not line.startswith("#")]


def _log_lines(log: str, msg: str) -> List[str]:
    return [line for line in log.splitlines() if f'msg="{msg}"' in line]


def _field(line: str, key: str) -> str:
    found = re.search(rf'(?:^| ){key}=("(?:[^"\\]|\\.)*"|\S*)', line)
    assert found, (key, line)
    value = found.group(1)
    return value[1:-1].replace('\\"', '"') if value.startswith('"') else value


def _named_files(text: str) -> Set[str]:
    """The files a log line or reason says a read blocks on, resolved."""
    return {os.path.realpath(path) for path in re.findall(r"blocked reading ([^;\s]+)", text)}

def _threads_opening_a_fifo(pid: int) -> Optional[int]:
    """How many threads of the process wait in open() of a FIFO for a writer (the kernel's
    wait_for_partner); None where the kernel does not say (wchan hidden). Opening the FIFO
    to ask would end the wait."""
    waits = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/wchan") as handle:
                waits.append(handle.read().strip())
        except OSError:
            pass
    if not any(w not in ("", "0") for w in waits):
        return None
    return waits.count("wait_for_partner")


def _stop(exporter, fifo: str, wrong: List[str]) -> float:
    """SIGTERM while the read still blocks (nobody ever opened the FIFO for writing): the
    process must exit 0 within STOP_WITHIN seconds. Returns how long it took."""
    if _threads_opening_a_fifo(exporter.proc.pid) == 0:
        wrong.append(f"no thread waits on {fifo} before SIGTERM")
    exporter.proc.send_signal(signal.SIGTERM)
    start = time.monotonic()
    try:
        code = exporter.proc.wait(STOP_WITHIN)
        if code != 0:
            wrong.append(f"exit status {code} after SIGTERM")
    except subprocess.TimeoutExpired:
        wrong.append(f"still running {STOP_WITHIN:g} s after SIGTERM while {fifo} blocks")
        exporter.proc.kill()  # the test has its answer: no need for run_exporter's longer grace
        exporter.proc.wait()
    return time.monotonic() - start


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_blocking_file_fails_the_collectors_that_need_it_once_and_sigterm_still_stops(case, machine_tree,
                                                                                          tmp_path):
    root, fifo, _ = _blocking_tree(case, machine_tree, tmp_path)
    expected = _expected(root, case.sources)
    failing_collectors = sorted(name for name, ok in expected.collectors.items() if not ok)
    assert set(case.at_least) <= set(failing_collectors) and any(expected.collectors.values()), expected
    golden = _golden_lines(case)
    # Several findings are checked before any assertion stops the test, so that one run says
    # everything that is wrong, and SIGTERM is always tried.
    wrong: List[str] = []
    with _start(root, tmp_path) as exporter:
        walls = []
        for scrape in range(SCRAPES):
            start = time.monotonic()
            response = exporter.get("/metrics", headers=DEADLINE)
            wall = time.monotonic() - start
            walls.append(round(wall, 2))
            text = response.text
            if response.status_code != 200:
                wrong.append(f"scrape {scrape}: status {response.status_code}")
                continue
            if wall >= SCRAPE_WALL:
                wrong.append(f"scrape {scrape} took {wall:.2f} s with a 2 s deadline")
            sources = {name: value == "1.0" for name, value in _gauges(text, "storpath_scrape_source_success",
                                                                         "source").items()}
            if sources != expected.sources:
                wrong.append(f"scrape {scrape}: sources {sources}, expected {expected.sources}")
            collectors = {name: value == "1.0" for name, value in _gauges(text, "storpath_scrape_collector_success",
                                                                            "collector").items()}
            if collectors != expected.collectors:
                wrong.append(f"scrape {scrape}: collectors {collectors}, expected {expected.collectors}")
            blocked_now = {name for name, value in _gauges(text, "storpath_scrape_source_blocked", "source").items()
                           if value == "1.0"}
            if blocked_now != set(case.sources):
                wrong.append(f"scrape {scrape}: sources reported blocked {sorted(blocked_now)}, expected {case.sources}")
            if "storpath_scrape_deadline_exceeded 0.0" not in text:
                wrong.append(f"scrape {scrape}: a blocked read was taken for a spent deadline")
            if case.id == "pci-beside-a-degraded-md-array" and 'storpath_md_degraded_disks{device="md1"} 1.0' not in text:
                wrong.append(f"scrape {scrape}: storpath_md_degraded_disks of the degraded array not served")
            if "storpath_build_info{" not in text:
                wrong.append(f"scrape {scrape}: no storpath_build_info")
            served = set(normalise(text).splitlines())
            blocked = {name for name, ok in expected.sources.items() if not ok}
            for line in golden:
                owner = expected.families.get(_sample_name(line))
                if set(ENRICHMENTS.get(_sample_name(line), ())) & blocked:
                    continue
                if owner is not None and expected.collectors[owner] and line not in served:
                    wrong.append(f"scrape {scrape}: {owner} succeeds but its series is missing: {line}")
                    break
            shown = {expected.families.get(_sample_name(line)) for line in text.splitlines()
                     if not line.startswith("#")}
            for name in failing_collectors:
                if name in shown:
                    wrong.append(f"scrape {scrape}: {name} failed but served series")
        if "pci" not in case.sources and "storpath_pcie_current_link_speed_transfers_per_second{" not in text:
            wrong.append("no pcie series although pci was read")
        log = exporter.log()
        # Each blocked source names the file it blocks on.
        for source in case.sources:
            said = [line for line in _log_lines(log, "source not read") if _field(line, "source") == source]
            if not said or fifo not in _named_files(said[0]):
                wrong.append(f"source {source}: no 'source not read' line naming {fifo}: {said}")
        # Each source that is not read, and each failing collector, is logged once over all the
        # scrapes (the reason stays the same while the read blocks); the others never.
        not_read = [_field(line, "source") for line in _log_lines(log, "source not read")]
        for name, ok in expected.sources.items():
            count = not_read.count(name)
            if count != (0 if ok else 1):
                wrong.append(f"'source not read' logged {count} times for {name} over {SCRAPES} scrapes")
        failed = [_field(line, "collector") for line in _log_lines(log, "collector failed")]
        for name in expected.collectors:
            count = failed.count(name)
            if count != (0 if expected.collectors[name] else 1):
                wrong.append(f"'collector failed' logged {count} times for {name} over {SCRAPES} scrapes")
        for line in _log_lines(log, "collector failed"):
            why = _field(line, "err")
            if "blocked reading" in why and fifo not in _named_files(why):
                wrong.append(f"a collector's reason names another file: {line}")
        stopped_in = _stop(exporter, fifo, wrong)
        log = exporter.log()
    assert not wrong, "\n".join(wrong + [f"scrape walls {walls} s, stopped in {stopped_in:.1f} s", "log:", log])


def test_the_collectors_recover_when_the_blocked_read_returns(machine_tree, tmp_path):
    case = CASES[0]  # the PCI tree: most collectors need it
    root, fifo, content = _blocking_tree(case, machine_tree, tmp_path)
    expected = _expected(root, case.sources)
    failing = sorted(name for name, ok in expected.collectors.items() if not ok)
    with _start(root, tmp_path) as exporter:
        first = exporter.get("/metrics", headers=DEADLINE).text
        assert {n for n, v in _gauges(first, "storpath_scrape_collector_success", "collector").items()
                if v == "0.0"} == set(failing), first
        # The device answers: the blocked read gets the value, the next reads the file.
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        regular = fifo + ".new"
        with open(regular, "wb") as handle:
            handle.write(content)
        os.replace(regular, fifo)
        os.write(writer, content)
        os.close(writer)
        end = time.monotonic() + 10
        while True:
            text = exporter.get("/metrics", headers=DEADLINE).text
            successes = _gauges(text, "storpath_scrape_collector_success", "collector")
            if all(value == "1.0" for value in successes.values()):
                break
            assert time.monotonic() < end, (successes, exporter.log())
            time.sleep(0.2)
        assert set(successes) == set(expected.collectors)
        assert set(_gauges(text, "storpath_scrape_source_success", "source").values()) == {"1.0"}
        # Served as if nothing had blocked.
        with open(machines.load(case.machine).golden(case.variant)) as handle:
            assert normalise(text) == handle.read()
        log = exporter.log()
    recovered = [_field(line, "collector") for line in _log_lines(log, "collector recovered")]
    assert sorted(recovered) == failing, log
    returned = [line for line in _log_lines(log, "blocked read returned") if _field(line, "source") == "pci"]
    assert len(returned) == 1, log


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sigterm_right_after_the_first_blocked_scrape_stops(case, machine_tree, tmp_path):
    """The first scrape leaves the blocked read behind; SIGTERM then, before a later scrape has
    met it again, must stop the process all the same."""
    root, fifo, _ = _blocking_tree(case, machine_tree, tmp_path)
    wrong: List[str] = []
    with _start(root, tmp_path) as exporter:
        response = exporter.get("/metrics", headers=DEADLINE)
        assert response.status_code == 200
        assert _gauges(response.text, "storpath_scrape_source_success", "source")[case.sources[0]] == "0.0"
        stopped_in = _stop(exporter, fifo, wrong)
        log = exporter.log()
    assert not wrong, "\n".join(wrong + [f"stopped in {stopped_in:.1f} s", "log:", log])
