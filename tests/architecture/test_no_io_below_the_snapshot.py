"""CONTRIBUTING.md: "A collector never opens a file", "Analysis does no I/O"; nor does
rendering. On every fixture machine, through `storpath serve`'s scrapes and `storpath check`,
nothing is opened, listed, started or connected while a collector's `values`, an analysis
function or rendering is on the stack, however the call was spelled (rules.io_violations)."""

import pytest

from tests.fixtures import machines

CASES = machines.all_cases()


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_values_analysis_and_rendering_reach_nothing_outside_the_process(judged, name, variant):
    run = judged(name, variant)
    assert run.sysfs_reads, "the recorder saw no read of the machine"
    assert run.io == []
