"""`storpath check` and `storpath serve` read every source through one runner (storpath.scrape.slow for
the slow ones): on every fixture machine, a check's snapshot and a scrape's (after the
background tasks ran once) hold the same records, source by source. A source decided one way in
the background and another way when read now (the multipath task asking whether dm_multipath is
loaded, the check asking whether there are maps) shows up here as a difference."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import StorpathExporter, build_collectors
from storpath.report.findings import take_snapshot
from storpath.base.roots import Roots
from storpath.scrape.slow import SLOW
from tests.fixtures import machines

# When a record was read: the scrape and the check read at different moments.
_WHEN = {"read_at", "finished_at", "taken_at"}


def comparable(value: Any) -> Any:
    """`value` with every time of reading left out, in plain containers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,
                {f.name: comparable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in _WHEN})
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple: by field
        return (type(value).__name__, {k: comparable(v) for k, v in value._asdict().items()
                                       if k not in _WHEN})
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, float):
        return "a time" if value > 1e9 else value  # the SAS counters' (errors, when read)
    return value


def _roots(root: str) -> Roots:
    return Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"), dev=os.path.join(root, "dev"),
                 captured=os.path.join(root, "captured"))


def served(roots: Roots):
    """A scrape's snapshot, the background tasks having run once."""
    scheduler = Scheduler()
    collectors = build_collectors(roots, validate({}, {}), scheduler)
    scheduler.run_all_once()
    exporter = StorpathExporter(collectors, roots)
    try:
        return exporter.snapshotter.take(30.0), {s.name for s in exporter.snapshotter.sources}
    finally:
        exporter.close()
        for collector in collectors:
            collector.ctx.slow.close()


@pytest.mark.parametrize("name,variant", machines.all_cases())
def test_check_and_serve_hold_the_same_records(tmp_path, name, variant):
    machines.load(name).build(str(tmp_path), variant)
    roots = _roots(str(tmp_path))
    scrape, read_by_scrape = served(roots)
    check = take_snapshot(roots, validate({}, {}))
    compared = sorted(read_by_scrape & (set(check.seconds) | set(check.failed)))
    assert {cls.name for cls in SLOW if cls.read_now} <= set(compared)
    assert {n: check.failed[n] for n in compared if n in check.failed} == \
        {n: scrape.failed[n] for n in compared if n in scrape.failed}
    for source in compared:
        assert comparable(getattr(check, source)) == comparable(getattr(scrape, source)), source
