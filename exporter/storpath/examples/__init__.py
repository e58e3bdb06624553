"""Example machines shipped with storpath, for `--example NAME` on `storpath check`, `tree` and
`serve`: a demonstration on any laptop of what storpath says about a healthy server and a sick
one, without the hardware.

Each example is one archive in this folder (`NAME.tar.gz`: the machine's `sys/`, `proc/` and
`captured/` command outputs), made from one of the test suite's fixture machines
(tests/fixtures/machines/MACHINE, whose README tells its story) by
`python -m tests.fixtures.examples` (`make examples`); tests/unit/test_examples.py checks the
archives are what the fixture machines build today. An archive is unpacked into a temporary
folder, removed when the command ends, and read as `--path.sysfs`, `--path.procfs` and
`--path.captured` would read it (no device node of this host is opened)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Dict, Tuple

from storpath.base.records import datarecord

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = "list"


@datarecord(frozen=True)
class Example:
    """One example machine: its name, what it shows, the fixture machine and variant it is made from."""

    name: str
    shows: str  # what storpath finds on it, for `--example list`
    machine: str  # the fixture machine it is made from (tests/fixtures/machines/)
    variant: str

    @property
    def archive(self) -> str:
        return os.path.join(HERE, f"{self.name}.tar.gz")


EXAMPLES: Tuple[Example, ...] = (
    Example("healthy-server", "a dual-socket server, four NVMe drives at their full 8 GT/s x4: clean",
            "supermicro-x10dri-hyperm2", "healthy"),
    Example("gen4-at-gen3", "a Gen4 NVMe drive trained at 8 GT/s though both ends do 16 GT/s, AER errors: warning",
            "am4-x570-firecuda", "gen3-trained"),
    Example("md-degraded", "a boot mirror (md1) with one SATA SSD failed and removed: critical",
            "epyc-7443-highpoint", "md-degraded"),
    Example("raid-shelf-1.5g", "a Smart Array's shelf of SATA drives at 1.5 Gbit/s, a failed cache battery",
            "hpe-dl380g7-p212-msa60", "as-found"),
    Example("vm", "a QEMU virtual machine: what storpath cannot know there, said instead of alerted on",
            "qemu-q35-new-rciep", "healthy"),
)
BY_NAME: Dict[str, Example] = {example.name: example for example in EXAMPLES}


def listing() -> str:
    """One example a line: its name, then what it shows."""
    width = max(len(example.name) for example in EXAMPLES)
    return "".join(f"{example.name:<{width}}  {example.shows}\n" for example in EXAMPLES)


def unknown(name: str) -> str:
    return f"no example {name!r}: {', '.join(BY_NAME)} (`storpath check --example list` says what each shows)"


def unpack(name: str) -> str:
    """The folder the example is unpacked into (removed when the process exits). KeyError
    with a readable message for a name that is no example."""
    if name not in BY_NAME:
        raise KeyError(unknown(name))
    root = tempfile.mkdtemp(prefix=f"storpath-example-{name}-")
    atexit.register(shutil.rmtree, root, True)
    import tarfile  # only where --example is given: not at every start of serve, check or tree

    with tarfile.open(BY_NAME[name].archive) as archive:
        # The data filter (Python 3.11.4 and later) refuses members that leave the folder;
        # the archives are storpath's own, so an older Python extracts them as they are.
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(root, **extra)
    return root
