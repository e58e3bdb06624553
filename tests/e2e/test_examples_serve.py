"""`storpath serve --example NAME`: the real exporter serves the example machine (its metrics and
its landing page), and removes the folder it unpacked it into when it stops."""

from __future__ import annotations

import glob
import os
import tempfile

from tests.conftest import run_exporter


def test_serve_an_example_then_leave_nothing_behind(tmp_path):
    pattern = os.path.join(tempfile.gettempdir(), "storpath-example-gen4-at-gen3-*")
    before = set(glob.glob(pattern))
    with run_exporter(["--example", "gen4-at-gen3"], str(tmp_path)) as exporter:
        text = exporter.metrics()
        assert 'storpath_pcie_current_link_speed_transfers_per_second{address="0000:06:00.0"} 8e+09' in text
        assert 'storpath_pcie_expected_link_speed_transfers_per_second{address="0000:06:00.0"} 1.6e+10' in text
        page = exporter.get("/").text
        assert "0000:06:00.0" in page and "FireCuda" in page
        assert len(set(glob.glob(pattern)) - before) == 1
    assert set(glob.glob(pattern)) == before, "the unpacked example is left behind"
