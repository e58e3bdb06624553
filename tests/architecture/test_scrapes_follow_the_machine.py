"""CONTRIBUTING.md: a long-running exporter serves what a fresh one serves, after every
change of the machine under it. tests/unit/test_scrape_caches.py changes a fixture machine
under one exporter (a link trains down, a counter moves, a driver is unbound, a device is
replaced or removed, a namespace reformatted, a disk swapped in the same bay) and compares
each scrape with a fresh exporter's: run here as it is, recorded, so that the scrapes of a
changing machine keep the I/O rule too."""

from tests.architecture.recorder import recording
from tests.architecture.rules import io_violations
from tests.unit import test_scrape_caches


def test_a_long_running_exporter_serves_what_a_fresh_one_serves(tmp_path):
    with recording() as events:
        test_scrape_caches.test_long_running_exporter_serves_what_a_fresh_one_serves_after_every_change(
            tmp_path / "changed", "am4-x570-firecuda", "healthy")
        test_scrape_caches.test_a_disk_swapped_under_the_same_name_shows_its_new_identity(tmp_path / "swapped")
    assert io_violations(events) == []
