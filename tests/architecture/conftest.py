from dataclasses import dataclass
from typing import List

import pytest

from tests.architecture.rules import io_violations, kept_state
from tests.architecture.served import observe


@dataclass(frozen=True)
class Judged:
    """What the rules found on one fixture machine's run (served.observe)."""
    sysfs_reads: int  # files opened below its sys/: the recorder saw the machine read
    io: List[str]  # rules.io_violations
    state: List[str]  # rules.kept_state


@pytest.fixture(scope="session")
def judged(machine_tree):
    """judged(name, variant) -> Judged: that fixture machine served for three scrapes and
    checked, once per session for every rule that judges it (the recorded stacks themselves
    are not kept: a few hundred megabytes over all machines)."""
    runs = {}

    def get(name: str, variant: str) -> Judged:
        if (name, variant) not in runs:
            root = machine_tree(name, variant)
            run = observe(root)
            reads = sum(1 for e in run.events if e.event == "open" and f"{root}/sys/" in e.target)
            runs[name, variant] = Judged(reads, io_violations(run.events), kept_state(run.taken))
        return runs[name, variant]

    return get
