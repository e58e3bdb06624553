"""log.once: one line per place however the value found there changes, a bounded set of
places, and log.describe, which every message uses to show a value."""

from __future__ import annotations

import logging
import os

import pytest

from storpath.base import log
from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import build_collectors, StorpathExporter
from storpath.base.roots import Roots
from tests.conftest import log_records
from tests.fixtures import machines
from tests.unit.test_config import collector_defaults

SCRAPES = 200


@pytest.fixture(autouse=True)
def fresh_once():
    log.forget_once_keys()
    yield
    log.forget_once_keys()


def test_a_value_that_changes_every_scrape_is_logged_once(tmp_path):
    """Before: the key held the value read, so every scrape made a new key, a new log line
    and more memory (+9.5 MB and 3000 lines over 3000 scrapes)."""
    builder = machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    roots = Roots(sysfs=os.path.join(str(tmp_path), "sys"), procfs=os.path.join(str(tmp_path), "proc"),
                  captured=os.path.join(str(tmp_path), "captured"))
    exporter = StorpathExporter(build_collectors(roots, validate({"collectors": {name: {"enabled": False} for name in (
        "alignment", "block", "inventory", "md", "numa", "nvme", "nvme_health", "sas", "sata", "zfs", "probes")}},
        collector_defaults()), Scheduler()))
    keys = []
    try:
        with log_records("storpath") as records:
            for scrape in range(SCRAPES):
                builder.set_attr("0000:04:00.0", "current_link_width", f"garbage-{scrape}")
                list(exporter.collect())
                keys.append(len(log._seen))
    finally:
        exporter.close()
    lines = [r for r in records if getattr(r, "fields", {}).get("attribute") == "current_link_width"]
    assert len(lines) == 1, [r.fields for r in lines[:5]]
    assert lines[0].fields["address"] == "0000:04:00.0" and "garbage-0" in lines[0].fields["reason"]
    assert keys[-1] == keys[0]  # the set did not grow after the first scrape


def test_the_set_of_places_is_bounded_and_says_so_once():
    logger = log.get("test")
    with log_records("storpath") as records:
        for index in range(log.MAX_ONCE_KEYS + 5000):
            log.once(logger, logging.WARNING, ("place", index), "a problem", place=index)
    assert len(log._seen) <= log.MAX_ONCE_KEYS + 1
    said = [r.getMessage() for r in records]
    assert said.count("a problem") == log.MAX_ONCE_KEYS
    full = [m for m in said if m != "a problem"]
    assert len(full) == 1 and "further ones are dropped" in full[0], full


@pytest.mark.parametrize("value,shown", [
    ("nvme0n1", "'nvme0n1'"),
    (40, "40"),
    ("\x1b[31mred\u202e", "'\\x1b[31mred\\u202e'"),
])
def test_describe_shows_short_values_as_repr(value, shown):
    assert log.describe(value) == shown


@pytest.mark.parametrize("value", [
    "x" * 1_000_000,
    list(range(100_000)),
    {f"key{i}": ["deep", ["deeper", ["deepest"] * 1000]] for i in range(1000)},
    10 ** 5000,  # beyond str()'s digit limit: repr raises
], ids=["string", "list", "nested", "huge-int"])
def test_describe_cuts_any_value_to_a_line(value):
    text = log.describe(value)
    assert 0 < len(text) <= log.DESCRIBE_LIMIT
